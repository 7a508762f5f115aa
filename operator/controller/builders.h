// Pure builders for the objects the operator owns for one HorovodJob.
//
// Every function depends only on its arguments: same job, same object. That
// makes reconciliation idempotent and lets the unit tests check each field.
// All objects carry the job's labels and a controller ownerReference, so
// deleting the job garbage-collects them.
//
//   <job>-token        Secret: the per-job rendezvous token
//   <job>-rendezvous   Pod + Service: khorovod-rendezvous for this job
//   <job>-worker       headless Service: stable DNS for worker pods
//   <job>-worker-<i>   Pod: worker i (hostname <job>-worker-<i>, subdomain <job>-worker;
//                      a memory-backed /dev/shm when slotsPerWorker > 1; for a
//                      GPU job the nvidia.com/gpu:NoSchedule toleration; the
//                      placement's pod affinity or topology spread; a required
//                      node affinity that keeps it off the nodes it must avoid)
//   <job>              PodGroup (scheduler-plugins), only with schedulingPolicy.gang
//   <job>              PodDisruptionBudget (policy/v1): minAvailable =
//                      minReplicas over the workers, so a drain or other
//                      eviction never takes the job below minReplicas
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "api/horovodjob.h"

namespace khorovod::op {

// Default metrics ports (container port name "metrics" on both pods).
inline constexpr int kWorkerMetricsPort = 29500;
inline constexpr int kRendezvousMetricsPort = 29401;
// Worker pods with slotsPerWorker > 1 get this memory-backed emptyDir at
// /dev/shm (the runtime's shared-memory transport between a pod's slots).
inline constexpr const char* kSharedMemoryVolume = "khorovod-shm";
// The annotation on a worker pod listing the nodes its affinity excludes
// (comma-separated): the planner re-creates a pod still Pending when the
// avoidance of one of them has expired.
inline constexpr const char* kAnnotationAvoidedNodes = "khorovod.dev/avoided-nodes";

std::string WorkerPodName(const HorovodJob& job, int index);
std::string WorkersServiceName(const HorovodJob& job);
std::string RendezvousName(const HorovodJob& job);
std::string TokenSecretName(const HorovodJob& job);
// "khorovod.dev/job-name=<job>,khorovod.dev/role=worker": the scale subresource's selector.
std::string WorkerSelector(const HorovodJob& job);
// host:port workers use to reach the rendezvous server (cluster DNS).
std::string RendezvousAddress(const HorovodJob& job);

Json OwnerReference(const HorovodJob& job);
Json BuildTokenSecret(const HorovodJob& job, const std::string& token);
Json BuildRendezvousService(const HorovodJob& job);
Json BuildRendezvousPod(const HorovodJob& job);
Json BuildWorkersService(const HorovodJob& job);
// `avoid_nodes`: node names the pod must not be scheduled on (GPU failures).
Json BuildWorkerPod(const HorovodJob& job, int index,
                    const std::vector<std::string>& avoid_nodes = {});
Json BuildPodGroup(const HorovodJob& job);
Json BuildDisruptionBudget(const HorovodJob& job);

// The worker index encoded in a worker pod's labels, or -1.
int WorkerIndexOf(const Json& pod);

}  // namespace khorovod::op
