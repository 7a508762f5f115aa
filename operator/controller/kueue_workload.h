// Kueue integration: the Workload a queued HorovodJob is admitted through.
//
// A job labelled kueue.x-k8s.io/queue-name (and not handed to another
// controller through spec.managedBy) gets one kueue.x-k8s.io/v1beta1
// Workload, owned by the job (controller reference), named
// "horovodjob-<job>", with two pod sets:
//   worker      count = maxReplicas, minCount = minReplicas when the job is
//               elastic (Kueue's partial admission admits any count in
//               [minCount, count] that the quota allows);
//   rendezvous  count = 1 (the rendezvous pod's own requests).
// The job runs no pod until the Workload is admitted, and then at most the
// admitted worker count (docs/kueue.md states the rules for users). On
// eviction (preemption, a deactivated Workload) the job's pods are deleted
// and, once none is left, the operator gives the quota back by clearing the
// admission; Kueue then queues the Workload again. A finished job marks its
// Workload Finished, which releases the quota.
//
// Everything here is pure: the reconciler does the reads and writes.
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/horovodjob.h"
#include "kube/resource.h"

namespace khorovod::op {

inline const kube::ResourceType kWorkloads{"kueue.x-k8s.io/v1beta1", "workloads", true};
inline const kube::ResourceType kResourceFlavors{"kueue.x-k8s.io/v1beta1", "resourceflavors",
                                                 false};
inline constexpr const char* kQueueNameLabel = "kueue.x-k8s.io/queue-name";
// spec.managedBy values this operator reconciles (unset means this one too).
inline constexpr const char* kManagedByKhorovod = "khorovod.dev/operator";

// True when the job must be admitted by Kueue before its pods exist.
bool QueuedByKueue(const HorovodJob& job);
// True when spec.managedBy hands the job to another controller.
bool ManagedElsewhere(const HorovodJob& job);

std::string WorkloadName(const HorovodJob& job);
Json BuildWorkload(const HorovodJob& job);

// What a Workload says about the job's right to run.
struct WorkloadAdmission {
  bool admitted = false;                        // QuotaReserved and Admitted true, not evicted
  bool quota_reserved = false;                  // status.admission is set (quota is held)
  bool evicted = false;                         // Evicted true: stop, then give the quota back
  bool finished = false;                        // Finished true
  int32_t workers = 0;                          // admitted worker count (podSetAssignments)
  std::vector<std::string> worker_flavors;      // ResourceFlavor names of the worker pod set
  std::vector<std::string> rendezvous_flavors;  // and of the rendezvous pod set
  std::string message;  // why it waits or was evicted (for the job's condition)
};
WorkloadAdmission ReadAdmission(const Json& workload, int32_t max_workers);

// The Workload with its quota given back (admission cleared, QuotaReserved and
// Admitted false), as Kueue's own job integrations do after stopping a job.
Json WorkloadWithoutQuota(const Json& workload, const std::string& now, const std::string& message);
// The Workload marked Finished (reason Succeeded or Failed).
Json WorkloadFinished(const Json& workload, bool succeeded, const std::string& now,
                      const std::string& message);

// Node selectors and tolerations of the given ResourceFlavor objects merged
// into a pod spec (the flavor's labels win over the template's for the same
// key, as Kueue's own integrations do).
void ApplyFlavors(Json& pod_spec, const std::vector<Json>& flavors);

}  // namespace khorovod::op
