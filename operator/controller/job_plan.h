// PlanJob: the pure heart of reconciliation. Given a HorovodJob, the pods it
// owns (as last observed) and the time, it decides what should change: pods
// to create or delete, the new status, events to record, and when to look
// again. It performs no I/O, so every rule below is unit-tested directly.
//
// PlanJob runs these phases in order; each either completes the plan or
// passes on (docs/api.md states the rules for users):
//   1. finished   Succeeded/Failed are never left: only cleanPodPolicy and
//                 ttlSecondsAfterFinished still act.
//   2. invalid    spec errors (found by api/validation before planning) fail
//                 the job with reason InvalidSpec: terminal, never a crash loop.
//   3. suspend    runPolicy.suspend deletes every pod and keeps the job;
//                 resuming re-creates them. The first unsuspended plan sets
//                 startTime. A job queued in Kueue is held the same way
//                 until its Workload is admitted, and again once evicted.
//   4. deadline   activeDeadlineSeconds after startTime fails the job.
//   5. lost nodes a worker (or the rendezvous pod) bound to a node that is
//                 NotReady/Unknown or tainted unreachable/not-ready
//                 (controller/node_health.h) for runPolicy.
//                 nodeLossTimeoutSeconds is force-deleted (grace period 0:
//                 the kubelet that would confirm a normal deletion is gone)
//                 and, like any missing index, re-created; the node goes on
//                 status.avoidedNodes for nodeCooldownSeconds so the
//                 replacement lands elsewhere. Not counted in restartCount
//                 (the program did not fail). Condition NodeLost and events
//                 NodeLost say which node, since when and when its workers
//                 are replaced; the job is looked at again at that time.
//                 Before completion: a job whose other workers finished
//                 waits for a lost node's worker only until that bound.
//   6. completion once any worker exited 0 training is over: nothing is
//                 created or replaced, workers not yet scheduled are deleted
//                 (they would never train), and the job is Succeeded when no
//                 other worker is Pending or Running (a lost node's worker
//                 being force-deleted does not count). (All ranks of a
//                 khorovod job finish their last step together.)
//   7. failures   a worker whose GPU failed (exit code kGpuErrorExitCode,
//                 or a device its pod status reports Unhealthy, even while
//                 it runs) counts as failed, is retried under every
//                 restartPolicy but Never, and puts its node on
//                 status.avoidedNodes for nodeCooldownSeconds (event
//                 NodeAvoided); new workers are kept off avoided nodes.
//                 A failed worker is deleted and (once gone) re-created while
//                 restartCount stays within backoffLimit; restartPolicy Never
//                 fails the job instead, ExitCode fails it for exit codes
//                 1-127. Each failed pod is counted once: its UID is kept in
//                 status.countedFailures until the pod is seen gone. A
//                 worker the cluster stopped (DisruptionTarget condition,
//                 reason Evicted or Preempting) is replaced without being
//                 counted, under every restartPolicy (event WorkerDisrupted).
//                 On a lost node its deletion stays forced.
//   8. scaling    desired workers = spec.replicas (at most the worker count
//                 Kueue admitted, for a queued job): missing indices in
//                 [0, desired) are created, indices >= desired deleted,
//                 highest first; a failed rendezvous pod is re-created. A
//                 worker still unscheduled whose affinity excludes a node no
//                 longer avoided is deleted, to be re-created without it.
//   9. conditions Running/Restarting/Scaling/Unschedulable and the phase. A worker counts
//                 toward readyReplicas only when Running, Ready and not
//                 terminating.
// On finishing, cleanPodPolicy decides which pods are deleted; after
// ttlSecondsAfterFinished the job itself is deleted.
//
// Thread-safety: a pure function.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/horovodjob.h"
#include "controller/node_health.h"

namespace khorovod::op {

struct PlannedEvent {
  std::string type;  // "Normal" | "Warning"
  std::string reason;
  std::string message;
};

struct PodDeletion {
  std::string name;
  std::string uid;  // precondition: delete only this incarnation
  std::string reason;
  bool force = false;  // grace period 0: the pod's node is lost
};

struct JobPlan {
  std::vector<int> create_workers;       // indices, ascending
  std::vector<PodDeletion> delete_pods;  // workers highest index first, then others
  bool ensure_rendezvous = false;        // rendezvous pod, services and secret must exist
  bool recreate_rendezvous = false;      // the rendezvous pod failed: delete it
  // Failed pod UIDs this plan counted as restarts: the status must be stored
  // (it lists them in countedFailures) before those pods are deleted.
  std::vector<std::string> counted_failures;
  HorovodJobStatus status;
  std::vector<PlannedEvent> events;
  bool delete_job = false;               // TTL after finishing expired
  std::vector<std::string> avoid_nodes;  // new worker pods must not land on these
  std::optional<std::chrono::seconds> requeue_after;
};

// For a job queued in Kueue (controller/kueue_workload.h): may it run, and
// with how many workers at most.
struct AdmissionGate {
  bool admitted = false;
  int32_t workers = 0;  // the admitted worker count
  std::string message;  // why the job is held
};

struct PlanInput {
  const HorovodJob* job = nullptr;
  std::vector<Json> workers;            // worker pods owned by the job
  std::optional<Json> rendezvous;       // the rendezvous pod, if it exists
  std::vector<FieldError> spec_errors;  // decoding and Validate(job) errors: the job cannot run
  std::optional<int64_t> rendezvous_generation;  // last read from the rendezvous server, if any
  std::optional<AdmissionGate> admission;        // set only for a job queued in Kueue
  // Health of the nodes the job's pods are bound to (empty when the operator
  // does not watch nodes: then lost nodes are left to the taint eviction).
  std::map<std::string, NodeHealth> nodes;
  std::chrono::system_clock::time_point now;
};

JobPlan PlanJob(const PlanInput& input);

// RFC 3339 seconds ("2026-11-22T12:00:00Z").
std::string FormatTime(std::chrono::system_clock::time_point t);

}  // namespace khorovod::op
