#include "core/burst_rule.h"

#include <algorithm>

namespace khorovod {

std::chrono::microseconds SmallBurstHold(std::chrono::microseconds cycle_time) {
  if (cycle_time.count() <= 0) return std::chrono::microseconds(0);
  return std::max(cycle_time, kSmallBurstHold);
}

BurstVerdict JudgeBurst(const BurstState& state, std::chrono::microseconds cycle_time) {
  if (state.blocked_threads > 0) return BurstVerdict::kRunRound;
  const bool paused = state.since_last >= std::min(kBurstQuiet, cycle_time);
  if (state.queued_bytes >= kMinRoundBytes || state.awaited) {
    return paused || state.since_start >= cycle_time ? BurstVerdict::kRunRound
                                                     : BurstVerdict::kPoll;
  }
  if (state.since_start >= SmallBurstHold(cycle_time)) return BurstVerdict::kRunRound;
  return paused ? BurstVerdict::kSleep : BurstVerdict::kPoll;
}

}  // namespace khorovod
