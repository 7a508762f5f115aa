#include "core/stall_inspector.h"

#include <map>
#include <set>
#include <sstream>

namespace khorovod {
namespace {

std::string Seconds(std::chrono::milliseconds ms) {
  std::ostringstream os;
  os << static_cast<double>(ms.count()) / 1000.0;
  return os.str();
}

}  // namespace

StallInspector::StallInspector(StallPolicy policy) : policy_(policy) {}

bool StallInspector::Due(bool anything_pending, Clock::time_point now) const {
  if (!policy_.enabled || !anything_pending) return false;
  return !last_inspection_ || now - *last_inspection_ >= policy_.warning_time;
}

std::optional<StallReport> StallInspector::Inspect(const std::vector<PendingTensor>& pending,
                                                   Clock::time_point now) {
  last_inspection_ = now;
  if (!policy_.enabled) return std::nullopt;
  const bool shutdown_honoured =
      policy_.shutdown_time.count() > 0 && policy_.shutdown_time >= policy_.warning_time;
  std::map<int, std::set<std::string>> missing;  // rank -> tensors
  std::set<int> shutdown_ranks;
  for (const PendingTensor& t : pending) {
    const auto lag = now - t.first_seen;
    if (lag < policy_.warning_time) continue;
    for (int r : t.missing_ranks) {
      missing[r].insert(t.name);
      if (shutdown_honoured && lag >= policy_.shutdown_time) shutdown_ranks.insert(r);
    }
  }
  if (missing.empty()) return std::nullopt;
  StallReport report;
  report.shut_down = !shutdown_ranks.empty();
  std::ostringstream os;
  os << "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of "
        "ranks "
        "and are waiting for remainder of ranks for more than "
     << Seconds(policy_.warning_time)
     << " seconds. This may indicate that different ranks are trying to submit different tensors "
        "or "
        "that only subset of ranks is submitting tensors, which will cause deadlock.\nMissing "
        "ranks:";
  for (const auto& [rank, names] : missing) {
    os << "\n" << rank << (shutdown_ranks.count(rank) ? "!" : "") << ": [";
    int shown = 0;
    for (auto it = names.begin(); it != names.end(); ++it, ++shown) {
      if (shown == 6) {
        os << ", ...";
        break;
      }
      os << (shown ? ", " : "") << *it;
    }
    os << "]";
  }
  if (report.shut_down) {
    os << "\nOne or more rank (marked by \"!\") is stalled for longer than "
       << Seconds(policy_.shutdown_time)
       << " seconds (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS). Will shutdown.";
  } else if (policy_.shutdown_time.count() > 0 && !shutdown_honoured && !noted_ignored_shutdown_) {
    noted_ignored_shutdown_ = true;
    os << "\nHOROVOD_STALL_SHUTDOWN_TIME_SECONDS is less than HOROVOD_STALL_CHECK_TIME_SECONDS, "
          "will not shutdown.";
  }
  report.message = os.str();
  return report;
}

}  // namespace khorovod
