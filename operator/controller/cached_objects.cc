#include "controller/cached_objects.h"

namespace khorovod::op {
namespace {

void CopyIfPresent(const Json& from, Json& to, const char* key) {
  auto it = from.find(key);
  if (it != from.end() && !it->is_null()) to[key] = *it;
}

Json CachedMetadata(const Json& object) {
  Json meta = Json::object();
  auto it = object.find("metadata");
  if (it == object.end() || !it->is_object()) return meta;
  for (const char* key : {"name", "namespace", "uid", "resourceVersion", "labels", "deletionTimestamp"})
    CopyIfPresent(*it, meta, key);
  // Only the controller reference is read (ownership index, owner's key).
  auto refs = it->find("ownerReferences");
  if (refs != it->end() && refs->is_array()) {
    Json kept = Json::array();
    for (const auto& ref : *refs)
      if (ref.is_object() && ref.value("controller", false)) kept.push_back(ref);
    meta["ownerReferences"] = std::move(kept);
  }
  return meta;
}

Json CachedPodStatus(const Json& status) {
  Json out = Json::object();
  if (!status.is_object()) return out;
  for (const char* key : {"phase", "reason", "podIP"}) CopyIfPresent(status, out, key);
  auto conditions = status.find("conditions");
  if (conditions != status.end() && conditions->is_array()) {
    for (const auto& c : *conditions)
      if (c.is_object() && c.value("type", "") == "Ready")
        out["conditions"] = Json::array({{{"type", "Ready"}, {"status", c.value("status", "")}}});
  }
  auto containers = status.find("containerStatuses");
  if (containers != status.end() && containers->is_array()) {
    Json kept = Json::array();
    for (const auto& cs : *containers) {
      if (!cs.is_object()) continue;
      Json state = Json::object();
      auto st = cs.find("state");
      if (st != cs.end() && st->is_object() && st->contains("terminated") && (*st)["terminated"].is_object()) {
        const Json& t = (*st)["terminated"];
        state["terminated"] = Json::object();
        CopyIfPresent(t, state["terminated"], "exitCode");
      }
      kept.push_back({{"name", cs.value("name", "")}, {"state", std::move(state)}});
    }
    out["containerStatuses"] = std::move(kept);
  }
  return out;
}

}  // namespace

Json CachedPod(const Json& pod) {
  Json out = {{"metadata", CachedMetadata(pod)}};
  auto status = pod.find("status");
  if (status != pod.end()) out["status"] = CachedPodStatus(*status);
  return out;
}

Json CachedService(const Json& service) { return {{"metadata", CachedMetadata(service)}}; }

}  // namespace khorovod::op
