// Reconciler: drives one HorovodJob toward its spec.
//
// Reconcile(key) is a fixed sequence of phases (after controller-runtime's
// reconcile.Reconciler):
//   1. load       read the job from the informer cache; a job that is gone
//                 or being deleted needs nothing (garbage collection removes
//                 what it owns), nor does one whose spec.managedBy names
//                 another controller;
//   2. observe    its pods (and Kueue Workload, and the health of their nodes) from the cache,
//   decoding and validation errors
//                 (api/validation), and the rendezvous generation last read by
//                 the RendezvousMonitor (never a network call here);
//   3. plan       PlanJob (pure, controller/job_plan.h);
//   4. restarts   when the plan counted new worker failures, store the status
//                 (restartCount and the counted pod UIDs) before deleting
//                 those pods, so a failure is counted once even if the
//                 operator dies in between;
//   5. ttl        delete a finished job whose TTL expired;
//   6. kueue      for a job queued in Kueue (controller/kueue_workload.h):
//                 create its Workload; give an evicted Workload's quota back
//                 once the job's pods are gone; mark it Finished with the job;
//                 read the admitted ResourceFlavors for the pods about to be
//                 created (reconciler_kueue.cc);
//   7. rendezvous token Secret, Services, rendezvous pod (re-created when it
//                 failed), PodGroup, PodDisruptionBudget (created, or patched
//                 when minReplicas changed);
//   8. pods       deletions (highest worker index first), then creations
//                 (not of a pod this operator created that the cache does
//                 not show yet: controller/write_expectations.h);
//   9. status     PUT the status subresource when it changed, with the
//                 resourceVersion read in 1 (a stale view loses with 409;
//                 the job read in 1 is the object our last status write
//                 returned while the cache still holds the version that
//                 write replaced);
//  10. events     the plan's Events.
// It is level-triggered and idempotent: running it twice, or after an
// operator restart, creates and counts nothing twice (names are
// deterministic; AlreadyExists/NotFound answers count as success).
//
// Outcomes:
//   kDone          nothing more to do until the next event;
//   kRequeueAfter  look again after `after` (active deadline, TTL);
//   kRetry         a transient error: 409 conflict, 429 throttling, API outage
//                  or 5xx, or no random bytes for a token; the caller requeues
//                  with rate-limited backoff;
//   kTerminal      the request can never succeed as sent (403, 422); logged
//                  and recorded as a ReconcileError Event, not retried until
//                  the job changes.
// A job that cannot run (invalid spec, a name too long for its derived
// names) is not a reconcile error: the plan marks it Failed (InvalidSpec).
//
// Thread-safety: Reconcile may run concurrently for different keys; the work
// queue guarantees one key is never reconciled twice at the same time.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "api/horovodjob.h"
#include "controller/job_plan.h"
#include "controller/object_writer.h"
#include "controller/rendezvous_monitor.h"
#include "controller/write_expectations.h"
#include "khorovod/util/mutex.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/resource.h"
#include "kube/rest_client.h"

namespace khorovod::op {

inline const kube::ResourceType kHorovodJobs{std::string(kGroup) + "/" + kVersion, kPlural, true};

struct ReconcileOutcome {
  enum Kind { kDone, kRequeueAfter, kRetry, kTerminal } kind = kDone;
  std::chrono::milliseconds after{0};
  std::string message;
};

struct ReconcilerOptions {
  // Concurrent pod creations/deletions for one job (large jobs need fan-out).
  int write_parallelism = 16;
  // Gang scheduling needs the scheduler-plugins PodGroup CRD installed.
  bool podgroups_available = false;
  // Kueue's CRDs are installed: jobs labelled kueue.x-k8s.io/queue-name wait
  // for their Workload's admission (the controller then watches Workloads).
  bool kueue_available = false;
  // How often the RendezvousMonitor reads each live job's rendezvous status
  // (0: never), and its bound on one read.
  std::chrono::seconds rendezvous_refresh{15};
  std::chrono::milliseconds probe_timeout{500};
  // Keep a PodDisruptionBudget per job at minReplicas (policy/v1
  // poddisruptionbudgets create and patch).
  bool disruption_budgets = true;
};

struct GpuTotals {
  int64_t in_use = 0;
  int64_t wanted = 0;
};

class Reconciler {
 public:
  // `monitor` may be null (no rendezvous status in the job's status);
  // `workloads` (Kueue Workloads the operator created) is null without Kueue.
  // `nodes` (the Node cache, controller/node_health.h) is null when the
  // operator does not watch nodes: lost nodes are then left to the taint
  // eviction.
  Reconciler(kube::RestClient& client, kube::Informer& jobs, kube::Informer& pods,
             kube::Informer& services, kube::Informer* workloads, kube::EventRecorder& events,
             RendezvousMonitor* monitor, ReconcilerOptions options = {},
             kube::Informer* nodes = nullptr);

  ReconcileOutcome Reconcile(const std::string& key);

  // Jobs per phase in the cache (for the jobs-by-phase gauge); a job not yet
  // reconciled counts as Created.
  std::map<JobPhase, int> PhaseCounts() const;
  // GPUs held and wanted by the unfinished jobs in the cache (their status.gpus
  // and status.gpusWanted), for the GPU gauge.
  GpuTotals Gpus() const;

 private:
  struct Attempt;  // one Reconcile call's state (reconciler_attempt.h)
  using Step = std::optional<ReconcileOutcome> (Reconciler::*)(Attempt&);

  bool Load(const std::string& key, Attempt& a);
  void Observe(Attempt& a);
  // The health of the nodes the job's pods are bound to.
  void ObserveNodes(Attempt& a);
  std::optional<ReconcileOutcome> RecordRestarts(Attempt& a);
  std::optional<ReconcileOutcome> DeleteExpiredJob(Attempt& a);
  void ObserveWorkload(Attempt& a);
  std::optional<ReconcileOutcome> SyncWorkload(Attempt& a);
  std::optional<ReconcileOutcome> ResolveFlavors(Attempt& a);
  std::optional<ReconcileOutcome> EnsureRendezvous(Attempt& a);
  std::optional<ReconcileOutcome> EnsureTokenSecret(Attempt& a);
  std::optional<ReconcileOutcome> EnsureDisruptionBudget(Attempt& a);
  std::optional<ReconcileOutcome> DeletePods(Attempt& a);
  std::optional<ReconcileOutcome> CreateWorkers(Attempt& a);
  std::optional<ReconcileOutcome> WriteStatus(Attempt& a);
  ReconcileOutcome Finish(Attempt& a);
  // The outcome for a failed API call: retry, terminal (with an Event), or
  // done when the job's namespace is going away.
  ReconcileOutcome Failed(const Attempt& a, const kube::ApiStatus& status, const std::string& what);
  // PUTs the plan's status; refreshes a.object on success.
  kube::ApiStatus PutStatus(Attempt& a);

  kube::RestClient& client_;
  kube::Informer& jobs_;
  kube::Informer& pods_;
  kube::Informer& services_;
  kube::Informer* const workloads_;
  kube::Informer* const nodes_;
  kube::EventRecorder& events_;
  RendezvousMonitor* const monitor_;
  const ReconcilerOptions options_;
  ObjectWriter writer_;
  WriteExpectations expectations_;

  Mutex mu_;
  // Job UIDs whose token Secret is known to exist.
  std::set<std::string> secret_ensured_ GUARDED_BY(mu_);
  // Job UID -> the minAvailable its PodDisruptionBudget is known to have.
  std::map<std::string, int32_t> budget_ensured_ GUARDED_BY(mu_);
};

}  // namespace khorovod::op
