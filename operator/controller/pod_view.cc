#include "controller/pod_view.h"

#include "controller/builders.h"

namespace khorovod::op {

PodView View(const Json& pod) {
  PodView v;
  v.index = WorkerIndexOf(pod);
  const Json& meta = pod.at("metadata");
  v.name = meta.value("name", "");
  v.uid = meta.value("uid", "");
  v.deleting = meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null();
  const Json& st = pod.value("status", Json::object());
  v.phase = st.value("phase", "Pending");
  v.reason = st.value("reason", "");
  if (v.reason == "Evicted" || v.reason == "Preempting") v.disrupted = true;
  for (const auto& c : st.value("conditions", Json::array())) {
    if (c.value("type", "") == "Ready" && c.value("status", "") == "True") v.ready = true;
    if (c.value("type", "") == "DisruptionTarget" && c.value("status", "") == "True")
      v.disrupted = true;
    if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False")
      v.unschedulable = c.value("message", "");
  }
  v.node = pod.value("spec", Json::object()).value("nodeName", "");
  const std::string avoided =
      meta.value("annotations", Json::object()).value(kAnnotationAvoidedNodes, std::string());
  for (size_t start = 0; start < avoided.size();) {
    size_t end = avoided.find(',', start);
    if (end == std::string::npos) end = avoided.size();
    if (end > start) v.avoided_nodes.push_back(avoided.substr(start, end - start));
    start = end + 1;
  }
  for (const auto& cs : st.value("containerStatuses", Json::array())) {
    const Json& state = cs.value("state", Json::object());
    if (!state.contains("terminated")) continue;
    int code = state["terminated"].value("exitCode", 0);
    if (v.exit_code <= 0) v.exit_code = code;
  }
  for (const auto& cs : st.value("containerStatuses", Json::array()))
    for (const auto& r : cs.value("allocatedResourcesStatus", Json::array()))
      if (r.value("name", "") == kGpuResource)
        for (const auto& d : r.value("resources", Json::array()))
          if (d.value("health", "") == "Unhealthy")
            v.unhealthy_gpus.push_back(d.value("resourceID", ""));
  return v;
}

// Whether restartPolicy lets the operator replace the failed `pod`: Never
// never, OnFailure always, ExitCode (Horovod's elastic choice) for a signal,
// an eviction, a deadline or a GPU failure.
bool Retryable(const PodView& pod, RestartPolicy policy) {
  if (policy == RestartPolicy::kNever) return false;
  if (policy == RestartPolicy::kOnFailure || pod.gpu_failed()) return true;
  if (pod.reason == "Evicted" || pod.reason == "Preempting" || pod.reason == "DeadlineExceeded")
    return true;
  return pod.exit_code < 0 || pod.exit_code >= 128;
}

// What failed, for messages: the exit code, or the Unhealthy devices of a
// worker that still runs.
std::string FailureText(const PodView& pod) {
  if (pod.failed()) return "exit code " + std::to_string(pod.exit_code);
  std::string ids;
  for (const auto& id : pod.unhealthy_gpus) ids += (ids.empty() ? "" : ", ") + id;
  return "GPU " + ids + " Unhealthy";
}

}  // namespace khorovod::op
