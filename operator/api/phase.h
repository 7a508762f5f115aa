// JobPhase and the condition types of HorovodJob status: the one place that
// spells them. status.phase and conditions[].type are strings on the wire
// (crds/horovodjob.yaml lists the same values); the operator works with the
// enum and converts only when decoding and encoding (codec.cc).
//
// Thread-safety: constants and pure functions.
#pragma once

#include <optional>
#include <string_view>

namespace khorovod::op {

enum class JobPhase {
  kNone,     // not reconciled yet ("" on the wire)
  kCreated,  // pods being created, fewer than minReplicas ready
  kRunning,
  kRestarting,  // a failed worker is being replaced
  kScaling,     // the worker count is moving to spec.replicas
  kSuspended,
  kSucceeded,  // final
  kFailed,     // final
};

// Every phase, in the order above.
inline constexpr JobPhase kJobPhases[] = {
    JobPhase::kNone,    JobPhase::kCreated,   JobPhase::kRunning,   JobPhase::kRestarting,
    JobPhase::kScaling, JobPhase::kSuspended, JobPhase::kSucceeded, JobPhase::kFailed};

const char* ToString(JobPhase phase);
// The phase named `text`; nullopt for a name this version does not know.
std::optional<JobPhase> ParseJobPhase(std::string_view text);
// Succeeded and Failed are never left.
inline bool IsFinished(JobPhase phase) {
  return phase == JobPhase::kSucceeded || phase == JobPhase::kFailed;
}

// conditions[].type values.
namespace condition {
inline constexpr const char* kCreated = "Created";
inline constexpr const char* kRunning = "Running";
inline constexpr const char* kRestarting = "Restarting";
inline constexpr const char* kScaling = "Scaling";
inline constexpr const char* kSuspended = "Suspended";
// True while some desired workers cannot be scheduled (e.g. too few GPUs);
// the message carries the scheduler's reason.
inline constexpr const char* kUnschedulable = "Unschedulable";
// Some workers run on a node that is NotReady/Unknown or unreachable: they
// are force-deleted and replaced after runPolicy.nodeLossTimeoutSeconds.
inline constexpr const char* kNodeLost = "NodeLost";
inline constexpr const char* kSucceeded = "Succeeded";
inline constexpr const char* kFailed = "Failed";
}  // namespace condition

}  // namespace khorovod::op
