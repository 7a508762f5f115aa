// The burst rule (core/burst_rule.h): when an idle rank's gathered
// submissions become a round, as a pure function of what it sees.
#include "core/burst_rule.h"

#include <gtest/gtest.h>

namespace khorovod {
namespace {

using std::chrono::microseconds;
constexpr microseconds kCycle{1000};

BurstState Seen(microseconds since_start, microseconds since_last, uint64_t bytes,
                int blocked = 0) {
  return BurstState{since_start, since_last, bytes, blocked};
}

TEST(BurstRule, ABlockedThreadEndsAnyBurstAtOnce) {
  EXPECT_EQ(JudgeBurst(Seen(microseconds(0), microseconds(0), 4, 1), kCycle),
            BurstVerdict::kRunRound);
  EXPECT_EQ(JudgeBurst(Seen(microseconds(0), microseconds(0), kMinRoundBytes, 2), kCycle),
            BurstVerdict::kRunRound);
}

TEST(BurstRule, ALargeBurstEndsWhenSubmissionsPause) {
  const uint64_t large = kMinRoundBytes;
  EXPECT_EQ(JudgeBurst(Seen(microseconds(50), microseconds(10), large), kCycle),
            BurstVerdict::kPoll);
  EXPECT_EQ(JudgeBurst(Seen(microseconds(150), kBurstQuiet, large), kCycle),
            BurstVerdict::kRunRound);
}

TEST(BurstRule, ALargeBurstStillArrivingEndsAfterOneCycle) {
  EXPECT_EQ(JudgeBurst(Seen(kCycle - microseconds(1), microseconds(1), 1 << 20), kCycle),
            BurstVerdict::kPoll);
  EXPECT_EQ(JudgeBurst(Seen(kCycle, microseconds(1), 1 << 20), kCycle), BurstVerdict::kRunRound);
}

TEST(BurstRule, ASmallPausedBurstSleepsForMore) {
  const uint64_t small = kMinRoundBytes - 1;
  EXPECT_EQ(JudgeBurst(Seen(microseconds(20), microseconds(20), small), kCycle),
            BurstVerdict::kPoll);
  EXPECT_EQ(JudgeBurst(Seen(microseconds(200), kBurstQuiet, small), kCycle), BurstVerdict::kSleep);
  // Past the cycle time it still waits: the hold, not the cycle, bounds it.
  EXPECT_EQ(JudgeBurst(Seen(kCycle * 3, kCycle * 3, small), kCycle), BurstVerdict::kSleep);
}

TEST(BurstRule, AnAwaitedSmallBurstEndsWhenSubmissionsPause) {
  // A completion callback (TensorFlow's kernels) or an unfinished poll
  // awaits the result: no hold, the large burst's rule.
  BurstState state = Seen(microseconds(200), kBurstQuiet, 4);
  state.awaited = true;
  EXPECT_EQ(JudgeBurst(state, kCycle), BurstVerdict::kRunRound);
  state.since_last = microseconds(10);
  EXPECT_EQ(JudgeBurst(state, kCycle), BurstVerdict::kPoll);
  state.since_start = kCycle;
  EXPECT_EQ(JudgeBurst(state, kCycle), BurstVerdict::kRunRound);
}

TEST(BurstRule, ASmallBurstEndsAtTheHold) {
  const microseconds hold = SmallBurstHold(kCycle);
  EXPECT_EQ(hold, kSmallBurstHold);
  EXPECT_EQ(JudgeBurst(Seen(hold - microseconds(1), hold, 4), kCycle), BurstVerdict::kSleep);
  EXPECT_EQ(JudgeBurst(Seen(hold, hold, 4), kCycle), BurstVerdict::kRunRound);
  // Still arriving at the hold: it ends all the same.
  EXPECT_EQ(JudgeBurst(Seen(hold, microseconds(1), 4), kCycle), BurstVerdict::kRunRound);
}

TEST(BurstRule, TheHoldIsNeverShorterThanTheCycleTime) {
  const microseconds long_cycle = kSmallBurstHold * 2;
  EXPECT_EQ(SmallBurstHold(long_cycle), long_cycle);
  EXPECT_EQ(JudgeBurst(Seen(kSmallBurstHold, kSmallBurstHold, 4), long_cycle),
            BurstVerdict::kSleep);
}

TEST(BurstRule, AZeroCycleTimeEndsEveryBurstAtOnce) {
  const microseconds zero{0};
  EXPECT_EQ(SmallBurstHold(zero), zero);
  EXPECT_EQ(JudgeBurst(Seen(zero, zero, 4), zero), BurstVerdict::kRunRound);
  EXPECT_EQ(JudgeBurst(Seen(zero, zero, 1 << 20), zero), BurstVerdict::kRunRound);
}

}  // namespace
}  // namespace khorovod
