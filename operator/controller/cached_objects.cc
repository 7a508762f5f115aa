#include "controller/cached_objects.h"

#include "controller/builders.h"

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
  for (const char* key :
       {"name", "namespace", "uid", "resourceVersion", "labels", "deletionTimestamp"})
    CopyIfPresent(*it, meta, key);
  // The one annotation the planner reads (the nodes a worker pod avoids).
  auto annotations = it->find("annotations");
  if (annotations != it->end() && annotations->is_object() &&
      annotations->contains(kAnnotationAvoidedNodes))
    meta["annotations"] = {{kAnnotationAvoidedNodes, (*annotations)[kAnnotationAvoidedNodes]}};
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
    Json kept = Json::array();
    for (const auto& c : *conditions) {
      if (!c.is_object()) continue;
      if (c.value("type", "") == "Ready")
        kept.push_back({{"type", "Ready"}, {"status", c.value("status", "")}});
      // Why a worker stopped: an eviction or preemption is no failure.
      if (c.value("type", "") == "DisruptionTarget" && c.value("status", "") == "True")
        kept.push_back(
            {{"type", "DisruptionTarget"}, {"status", "True"}, {"reason", c.value("reason", "")}});
      // Why a worker waits: the scheduler's message ("Insufficient nvidia.com/gpu").
      if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False")
        kept.push_back(
            {{"type", "PodScheduled"}, {"status", "False"}, {"message", c.value("message", "")}});
    }
    if (!kept.empty()) out["conditions"] = std::move(kept);
  }
  auto containers = status.find("containerStatuses");
  if (containers != status.end() && containers->is_array()) {
    Json kept = Json::array();
    for (const auto& cs : *containers) {
      if (!cs.is_object()) continue;
      Json state = Json::object();
      auto st = cs.find("state");
      if (st != cs.end() && st->is_object() && st->contains("terminated") &&
          (*st)["terminated"].is_object()) {
        const Json& t = (*st)["terminated"];
        state["terminated"] = Json::object();
        CopyIfPresent(t, state["terminated"], "exitCode");
      }
      Json entry = {{"name", cs.value("name", "")}, {"state", std::move(state)}};
      // Device health (the kubelet's ResourceHealthStatus): only what is Unhealthy.
      Json unhealthy = Json::array();
      for (const auto& r : cs.value("allocatedResourcesStatus", Json::array())) {
        if (!r.is_object()) continue;
        for (const auto& d : r.value("resources", Json::array()))
          if (d.is_object() && d.value("health", "") == "Unhealthy")
            unhealthy.push_back({{"name", r.value("name", "")}, {"resources", Json::array({d})}});
      }
      if (!unhealthy.empty()) entry["allocatedResourcesStatus"] = std::move(unhealthy);
      kept.push_back(std::move(entry));
    }
    out["containerStatuses"] = std::move(kept);
  }
  return out;
}

}  // namespace

Json CachedPod(const Json& pod) {
  Json out = {{"metadata", CachedMetadata(pod)}};
  auto spec = pod.find("spec");
  if (spec != pod.end() && spec->is_object() && spec->contains("nodeName"))
    out["spec"] = {{"nodeName", (*spec)["nodeName"]}};
  auto status = pod.find("status");
  if (status != pod.end()) out["status"] = CachedPodStatus(*status);
  return out;
}

Json CachedService(const Json& service) { return {{"metadata", CachedMetadata(service)}}; }

}  // namespace khorovod::op
