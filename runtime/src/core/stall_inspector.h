// StallInspector: Horovod's stall check (horovod/common/stall_inspector.cc)
// over rank 0's table of tensors that only some ranks have submitted.
//
// Contract:
//   * disabled (HOROVOD_STALL_CHECK_DISABLE): never due, never reports;
//   * every `warning_time` (HOROVOD_STALL_CHECK_TIME_SECONDS, default 60 s)
//     while something is pending, an inspection is due; it reports every
//     tensor pending for longer than `warning_time`, grouped by missing rank
//     as Horovod's warning is ("Missing ranks:\n1: [a, b]"), and nothing
//     fails: a slow rank is not an error;
//   * when `shutdown_time` (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS) is > 0 and
//     some tensor was pending for longer, the report asks for the job to
//     shut down and marks the ranks responsible with "!". A shutdown time
//     below the warning time is ignored (Horovod: "will not shutdown"),
//     with a note in the first report.
// The result is a pure function of the pending tensors and the clock
// readings passed in.
//
// Thread-safety: none; owned by rank 0's background thread.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace khorovod {

struct StallPolicy {
  bool enabled = true;
  std::chrono::milliseconds warning_time{60'000};
  std::chrono::milliseconds shutdown_time{0};  // 0: never shut down
};

// A tensor some ranks of its process set have submitted and others not.
struct PendingTensor {
  std::string name;
  std::vector<int> missing_ranks;  // global ranks
  std::chrono::steady_clock::time_point first_seen;
};

struct StallReport {
  std::string message;     // the warning (or error) text, Horovod's wording
  bool shut_down = false;  // some tensor waited past the shutdown time
};

class StallInspector {
 public:
  using Clock = std::chrono::steady_clock;

  explicit StallInspector(StallPolicy policy);

  // True when an inspection is due: enabled, something is pending, and a
  // warning period passed since the last inspection (or the start).
  bool Due(bool anything_pending, Clock::time_point now) const;
  // Inspects `pending`; nullopt when no tensor waited past the warning time.
  std::optional<StallReport> Inspect(const std::vector<PendingTensor>& pending,
                                     Clock::time_point now);

 private:
  StallPolicy policy_;
  std::optional<Clock::time_point> last_inspection_;
  bool noted_ignored_shutdown_ = false;
};

}  // namespace khorovod
