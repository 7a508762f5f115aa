// PlanJob: the pure heart of reconciliation. Given a HorovodJob, the pods it
// owns (as last observed) and the time, it decides what should change: pods
// to create or delete, the new status, events to record, and when to look
// again. It performs no I/O, so every rule below is unit-tested directly.
//
// Rules (docs/api.md states them for users):
//   - Desired workers = spec.replicas (validated to lie in [min, max]).
//     Missing indices in [0, desired) are created; indices >= desired are
//     deleted, highest first.
//   - A worker counts toward readyReplicas only when Running, Ready and not
//     terminating.
//   - A failed worker is deleted and (once gone) re-created while the number
//     of restarts stays within runPolicy.backoffLimit; restartPolicy Never
//     fails the job instead, and ExitCode fails it for exit codes 1-127
//     (replacing only for 128-255, i.e. signals, and for evictions).
//   - Success: once any worker has exited 0 the job is completing: nothing is
//     created or replaced, and the job is Succeeded when no worker is still
//     pending or running. (All ranks of a khorovod job finish their last step
//     together, so the first exit 0 means training ended.)
//   - Failure: backoff limit exceeded, a non-retryable exit, the active
//     deadline, or an invalid spec (reason InvalidSpec). Terminal phases are
//     never left.
//   - On finishing, cleanPodPolicy decides which pods are deleted; after
//     ttlSecondsAfterFinished the job itself is deleted.
//   - Suspend deletes every pod and keeps the job; resuming re-creates them.
//
// Thread-safety: a pure function.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "api/horovodjob.h"

namespace khorovod::op {

struct PlannedEvent {
  std::string type;    // "Normal" | "Warning"
  std::string reason;
  std::string message;
};

struct PodDeletion {
  std::string name;
  std::string uid;     // precondition: delete only this incarnation
  std::string reason;
};

struct JobPlan {
  std::vector<int> create_workers;               // indices, ascending
  std::vector<PodDeletion> delete_pods;          // workers highest index first, then others
  bool ensure_rendezvous = false;                // rendezvous pod, services and secret must exist
  bool recreate_rendezvous = false;              // the rendezvous pod failed: delete it
  std::vector<std::string> counted_failures;     // failed pod UIDs that consumed a restart
  HorovodJobStatus status;
  std::vector<PlannedEvent> events;
  bool delete_job = false;                       // TTL after finishing expired
  std::optional<std::chrono::seconds> requeue_after;
};

struct PlanInput {
  const HorovodJob* job = nullptr;
  std::vector<Json> workers;        // worker pods owned by the job
  std::optional<Json> rendezvous;   // the rendezvous pod, if it exists
  std::vector<std::string> already_counted;  // failed pod UIDs counted by an earlier plan
  std::vector<FieldError> decode_errors;
  std::optional<int64_t> rendezvous_generation;  // read from the server, when reachable
  std::chrono::system_clock::time_point now;
};

JobPlan PlanJob(const PlanInput& input);

// RFC 3339 seconds ("2026-11-22T12:00:00Z").
std::string FormatTime(std::chrono::system_clock::time_point t);

}  // namespace khorovod::op
