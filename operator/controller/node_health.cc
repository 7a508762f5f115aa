#include "controller/node_health.h"

#include "kube/leader_election.h"

namespace khorovod::op {
namespace {

void Earliest(NodeHealth& h, const Json& object, const char* field) {
  std::chrono::system_clock::time_point t;
  if (!object.is_object() || !kube::ParseTime(object.value(field, ""), t)) return;
  if (!h.since || t < *h.since) h.since = t;
}

}  // namespace

NodeHealth NodeHealthOf(const Json& node) {
  NodeHealth h;
  const Json status = node.value("status", Json::object());
  for (const auto& c :
       status.is_object() ? status.value("conditions", Json::array()) : Json::array()) {
    if (!c.is_object() || c.value("type", "") != "Ready" || c.value("status", "") == "True")
      continue;
    h.lost = true;
    h.why = "Ready=" + c.value("status", "") +
            (c.value("reason", "").empty() ? "" : " (" + c.value("reason", "") + ")");
    Earliest(h, c, "lastTransitionTime");
  }
  const Json spec = node.value("spec", Json::object());
  for (const auto& t : spec.is_object() ? spec.value("taints", Json::array()) : Json::array()) {
    if (!t.is_object()) continue;
    const std::string key = t.value("key", "");
    if (key != kTaintUnreachable && key != kTaintNotReady) continue;
    if (!h.lost) h.why = "taint " + key;
    h.lost = true;
    Earliest(h, t, "timeAdded");
  }
  if (!h.lost) h.since.reset();
  return h;
}

Json CachedNode(const Json& node) {
  Json meta = Json::object();
  const Json m = node.value("metadata", Json::object());
  for (const char* key : {"name", "resourceVersion"})
    if (m.is_object() && m.contains(key)) meta[key] = m[key];
  Json out = {{"metadata", meta}};
  const Json status = node.value("status", Json::object());
  Json ready = Json::array();
  for (const auto& c :
       status.is_object() ? status.value("conditions", Json::array()) : Json::array())
    if (c.is_object() && c.value("type", "") == "Ready") ready.push_back(c);
  out["status"] = {{"conditions", ready}};
  Json taints = Json::array();
  const Json spec = node.value("spec", Json::object());
  for (const auto& t : spec.is_object() ? spec.value("taints", Json::array()) : Json::array()) {
    const std::string key = t.is_object() ? t.value("key", "") : "";
    if (key == kTaintUnreachable || key == kTaintNotReady) taints.push_back(t);
  }
  out["spec"] = {{"taints", taints}};
  return out;
}

}  // namespace khorovod::op
