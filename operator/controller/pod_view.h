// PodView: the few facts the planner reads from an observed pod (worker or
// rendezvous), extracted once so that the planning phases compare fields,
// not JSON paths.
//
// Thread-safety: plain values; View() is a pure function.
#pragma once

#include <string>
#include <vector>

#include "api/horovodjob.h"

namespace khorovod::op {

struct PodView {
  int index = -1;  // worker index label, -1 if none
  std::string name, uid;
  std::string phase;      // the pod's phase: Pending, Running, Succeeded, Failed
  std::string reason;     // status.reason, e.g. Evicted
  bool deleting = false;  // has a deletionTimestamp
  bool ready = false;     // the Ready condition is True
  // Stopped by the cluster, not by its program: the DisruptionTarget
  // condition (eviction, preemption, taint eviction, node shutdown) or
  // reason Evicted/Preempting (the kubelet's node-pressure eviction).
  bool disrupted = false;
  int exit_code = -1;         // first non-zero terminated exit code, 0 if none, -1 if unknown
  std::string node;           // spec.nodeName: empty until scheduled
  std::string unschedulable;  // the scheduler's message while PodScheduled is False
  std::vector<std::string> unhealthy_gpus;  // nvidia.com/gpu devices the kubelet reports Unhealthy
  std::vector<std::string> avoided_nodes;  // what its node affinity excludes (builders' annotation)

  // Pending or Running: the pod occupies its slot.
  bool live() const { return phase == "Pending" || phase == "Running"; }
  bool failed() const { return phase == "Failed"; }
  bool succeeded() const { return phase == "Succeeded"; }
  // Its GPU failed: the reserved exit code, or a device reported Unhealthy.
  bool gpu_failed() const {
    return (failed() && exit_code == kGpuErrorExitCode) || !unhealthy_gpus.empty();
  }
};

PodView View(const Json& pod);

// Whether restartPolicy lets a failed worker be replaced (pod_view.cc).
bool Retryable(const PodView& pod, RestartPolicy policy);
// What failed, for messages: the exit code, or the Unhealthy devices of a
// worker that still runs.
std::string FailureText(const PodView& pod);

}  // namespace khorovod::op
