// Waiter signals: the spin rule (KHOROVOD_SPIN_WAITS against the allowed
// cores and the ranks on the host), the bounded spin, the waiter board and count.
#include "common/waiter_signal.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace khorovod {
namespace {

using std::chrono::microseconds;
using Clock = std::chrono::steady_clock;

TEST(SpinPolicy, AutoSpinsOnlyWhenEveryLocalRankHasACore) {
  EXPECT_TRUE(SpinPolicy::Resolve(SpinWaits::kAuto, 2, 2).enabled());
  EXPECT_TRUE(SpinPolicy::Resolve(SpinWaits::kAuto, 1, 8).enabled());
  EXPECT_FALSE(SpinPolicy::Resolve(SpinWaits::kAuto, 4, 2).enabled());
  EXPECT_FALSE(SpinPolicy::Resolve(SpinWaits::kAuto, 3, 2).enabled());
}

TEST(SpinPolicy, OnAndOffOverrideTheCoreCount) {
  EXPECT_TRUE(SpinPolicy::Resolve(SpinWaits::kOn, 8, 1).enabled());
  EXPECT_FALSE(SpinPolicy::Resolve(SpinWaits::kOff, 1, 64).enabled());
  EXPECT_FALSE(SpinPolicy().enabled());
}

TEST(SpinPolicy, BudgetIsZeroWhenSpinningIsOff) {
  EXPECT_EQ(SpinPolicy::Resolve(SpinWaits::kOn, 1, 1).Budget(microseconds(200)), microseconds(200));
  EXPECT_EQ(SpinPolicy::Resolve(SpinWaits::kOff, 1, 1).Budget(microseconds(200)), microseconds(0));
}

TEST(SpinPolicy, ForConfigReadsTheSettingAndLocalSize) {
  Config c;
  c.local_size = 1 << 20;                           // more ranks than any machine has cores
  EXPECT_TRUE(SpinPolicy::ForConfig(c).enabled());  // the default is on
  c.spin_waits = SpinWaits::kAuto;
  EXPECT_FALSE(SpinPolicy::ForConfig(c).enabled());
  c.spin_waits = SpinWaits::kOff;
  EXPECT_FALSE(SpinPolicy::ForConfig(c).enabled());
  c.spin_waits = SpinWaits::kOn;
  EXPECT_TRUE(SpinPolicy::ForConfig(c).enabled());
  c.spin_waits = SpinWaits::kAuto;
  c.local_size = 1;
  EXPECT_TRUE(SpinPolicy::ForConfig(c).enabled());
}

// sched_getaffinity reads the calling thread's mask: a thread pinned to one
// core sees one allowed core, whatever the machine has.
TEST(AllowedCores, FollowsTheAffinityMask) {
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  EXPECT_EQ(AllowedCores(), CPU_COUNT(&all));
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  int seen = -1;
  std::thread pinned([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (sched_setaffinity(0, sizeof one, &one) == 0) seen = AllowedCores();
  });
  pinned.join();
  EXPECT_EQ(seen, 1);
}

TEST(SpinUntil, ReturnsAsSoonAsTheConditionHolds) {
  std::atomic<bool> flag{false};
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    flag.store(true);
  });
  const auto start = Clock::now();
  EXPECT_TRUE(SpinUntil([&] { return flag.load(); }, std::chrono::seconds(30)));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  setter.join();
}

TEST(SpinUntil, GivesUpAfterItsBudget) {
  const auto start = Clock::now();
  EXPECT_FALSE(SpinUntil([] { return false; }, microseconds(2000)));
  EXPECT_GE(Clock::now() - start, microseconds(2000));
}

TEST(SpinUntil, AZeroBudgetPollsOnce) {
  int polls = 0;
  EXPECT_FALSE(SpinUntil([&] { return ++polls > 5; }, microseconds(0)));
  EXPECT_EQ(polls, 1);
  EXPECT_TRUE(SpinUntil([] { return true; }, microseconds(0)));
}

TEST(WaiterCount, CountsForItsLifetime) {
  WaiterBoard board;
  {
    WaiterCount a(&board);
    EXPECT_EQ(board.blocked(), 1);
    {
      WaiterCount b(&board);
      EXPECT_EQ(board.blocked(), 2);
    }
    EXPECT_EQ(board.blocked(), 1);
  }
  EXPECT_EQ(board.blocked(), 0);
  WaiterCount none(nullptr);  // before init(): no count, no crash
}

TEST(WaiterBoard, EnterNoteAwaitedAndPokeAreChangesButLeaveIsNot) {
  WaiterBoard board;
  const uint64_t start = board.changes();
  board.Poke();
  EXPECT_EQ(board.changes(), start + 1);
  board.Enter();
  EXPECT_EQ(board.changes(), start + 2);
  board.Leave();
  EXPECT_EQ(board.changes(), start + 2);
  EXPECT_EQ(board.awaited(), 0u);
  board.NoteAwaited();
  EXPECT_EQ(board.awaited(), 1u);
  EXPECT_EQ(board.changes(), start + 3);
}

TEST(WaiterBoard, AChangeBeforeTheWaitReturnsAtOnce) {
  WaiterBoard board;
  const uint64_t seen = board.changes();
  board.Poke();
  const auto start = Clock::now();
  board.WaitForChange(seen, start + std::chrono::seconds(30));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(30));
}

TEST(WaiterBoard, ABlockedThreadWakesTheSleeper) {
  WaiterBoard board;
  const uint64_t seen = board.changes();
  std::thread blocker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    WaiterCount blocked(&board);
  });
  const auto start = Clock::now();
  board.WaitForChange(seen, start + std::chrono::seconds(30));
  // Woken by the change, not by the deadline.
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(30));
  EXPECT_NE(board.changes(), seen);
  blocker.join();
}

TEST(WaiterBoard, WithoutAChangeTheWaitEndsAtItsDeadline) {
  WaiterBoard board;
  const auto deadline = Clock::now() + microseconds(2000);
  board.WaitForChange(board.changes(), deadline);
  EXPECT_GE(Clock::now(), deadline);
}

}  // namespace
}  // namespace khorovod
