// Reconciler: drives one HorovodJob toward its spec.
//
// Contract (after controller-runtime's reconcile.Reconciler):
//   - Reconcile(key) reads the job and its pods from the informers' caches,
//     asks PlanJob what should change, and applies it: Secret, Services and
//     rendezvous pod first, then pod deletions and creations, then the status
//     subresource, then Events.
//   - It is level-triggered and idempotent: running it twice, or after an
//     operator restart, creates nothing twice (names are deterministic, and
//     AlreadyExists/NotFound answers count as success).
//   - Outcome kDone: nothing more to do until the next event.
//     kRequeueAfter: look again after `after` (deadlines, TTL, pods not yet
//       observed). kRetry: a transient error (409 conflict on the status,
//       throttling, API outage); the caller requeues with rate-limited
//       backoff. kTerminal: the request can never succeed as sent (403, 422);
//       logged and recorded as an Event, not retried until the job changes.
//
// Thread-safety: Reconcile may run concurrently for different keys; the work
// queue guarantees one key is never reconciled twice at the same time.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "api/horovodjob.h"
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
  // Read the rendezvous generation from the running rendezvous pod's
  // metrics endpoint, and look at running jobs again this often to keep it
  // fresh (0: never probe).
  std::chrono::seconds rendezvous_refresh{15};
  std::chrono::milliseconds probe_timeout{500};
};

class Reconciler {
 public:
  Reconciler(kube::RestClient& client, kube::Informer& jobs, kube::Informer& pods, kube::Informer& services,
             kube::EventRecorder& events, ReconcilerOptions options = {});

  ReconcileOutcome Reconcile(const std::string& key);

  // Jobs per phase in the cache (for the jobs-by-phase gauge).
  std::map<std::string, int> PhaseCounts() const;

 private:
  kube::ApiStatus EnsureCreated(const kube::ResourceType& type, const std::string& ns, const Json& object,
                                bool* created);
  kube::ApiStatus DeletePod(const std::string& ns, const std::string& name, const std::string& uid);
  // Runs `op(i)` for i in [0, n) on up to write_parallelism threads; returns the first error.
  kube::ApiStatus ForEachParallel(size_t n, const std::function<kube::ApiStatus(size_t)>& op);

  kube::RestClient& client_;
  kube::Informer& jobs_;
  kube::Informer& pods_;
  kube::Informer& services_;
  kube::EventRecorder& events_;
  const ReconcilerOptions options_;

  std::mutex mu_;
  // Failed pod UIDs already counted as restarts, per job UID: the pod cache
  // may lag our own deletion, and a failure must consume one restart only.
  std::map<std::string, std::set<std::string>> counted_failures_;
  // Job UIDs whose token Secret is known to exist.
  std::set<std::string> secret_ensured_;
};

}  // namespace khorovod::op
