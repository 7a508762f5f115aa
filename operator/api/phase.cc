#include "api/phase.h"

namespace khorovod::op {
const char* ToString(JobPhase phase) {
  switch (phase) {
    case JobPhase::kNone:
      return "";
    case JobPhase::kCreated:
      return "Created";
    case JobPhase::kRunning:
      return "Running";
    case JobPhase::kRestarting:
      return "Restarting";
    case JobPhase::kScaling:
      return "Scaling";
    case JobPhase::kSuspended:
      return "Suspended";
    case JobPhase::kSucceeded:
      return "Succeeded";
    case JobPhase::kFailed:
      return "Failed";
  }
  return "";
}

std::optional<JobPhase> ParseJobPhase(std::string_view text) {
  for (JobPhase p : kJobPhases)
    if (text == ToString(p)) return p;
  return std::nullopt;
}

}  // namespace khorovod::op
