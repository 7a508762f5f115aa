// ShmSegment's barrier against peers that are not there: a rank that let go
// of the segment (left its generation) or never arrives. Both ranks live in
// this process, so only the departure mark, not a dead pid, can end a wait.
#include "backend/shm/shm_segment.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace khorovod::shm {
namespace {

using std::chrono::milliseconds;

TEST(ShmSegment, BarrierPassesOnceEveryRankArrived) {
  auto creator = ShmSegment::Create(2, 4096);
  ASSERT_TRUE(creator.ok()) << creator.status();
  auto peer = ShmSegment::Open((*creator)->name(), 2, 4096);
  ASSERT_TRUE(peer.ok()) << peer.status();
  (*creator)->Attach(0);
  (*peer)->Attach(1);
  std::thread other([&] { EXPECT_TRUE((*peer)->Barrier(1, 1, milliseconds(10'000)).ok()); });
  EXPECT_TRUE((*creator)->Barrier(0, 1, milliseconds(10'000)).ok());
  other.join();
}

TEST(ShmSegment, APeerThatLetGoEndsTheWaitAtOnce) {
  auto creator = ShmSegment::Create(2, 4096);
  ASSERT_TRUE(creator.ok()) << creator.status();
  {
    auto peer = ShmSegment::Open((*creator)->name(), 2, 4096);
    ASSERT_TRUE(peer.ok()) << peer.status();
    (*peer)->Attach(1);
  }  // rank 1 leaves the generation without arriving
  (*creator)->Attach(0);
  const auto start = std::chrono::steady_clock::now();
  Status s = (*creator)->Barrier(0, 1, milliseconds(20'000));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("left the generation"), std::string::npos) << s;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// A peer that died and is not reaped yet (a zombie still answers signal 0),
// as under a launcher that keeps dead workers until the job ends.
TEST(ShmSegment, AnUnreapedDeadPeerEndsTheWaitAtOnce) {
  auto creator = ShmSegment::Create(2, 4096);
  ASSERT_TRUE(creator.ok()) << creator.status();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto peer = ShmSegment::Open((*creator)->name(), 2, 4096);
    if (peer.ok()) (*peer)->Attach(1);
    _exit(peer.ok() ? 0 : 1);  // no destructors: no departure mark, only death
  }
  // Wait (bounded) until the child has exited, without reaping it.
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  ASSERT_EQ(info.si_status, 0);
  (*creator)->Attach(0);
  const auto start = std::chrono::steady_clock::now();
  Status s = (*creator)->Barrier(0, 1, milliseconds(20'000));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  waitpid(child, nullptr, 0);
}

TEST(ShmSegment, AnArrivalBeforeLeavingStillCounts) {
  auto creator = ShmSegment::Create(2, 4096);
  ASSERT_TRUE(creator.ok()) << creator.status();
  {
    auto peer = ShmSegment::Open((*creator)->name(), 2, 4096);
    ASSERT_TRUE(peer.ok()) << peer.status();
    (*peer)->Attach(1);
    (void)(*peer)->Barrier(1, 1, milliseconds(1));  // arrives, times out alone, leaves
  }
  (*creator)->Attach(0);
  EXPECT_TRUE((*creator)->Barrier(0, 1, milliseconds(10'000)).ok());
}

TEST(ShmSegment, ARankThatNeverArrivesTimesOut) {
  auto creator = ShmSegment::Create(2, 4096);
  ASSERT_TRUE(creator.ok()) << creator.status();
  auto peer = ShmSegment::Open((*creator)->name(), 2, 4096);
  ASSERT_TRUE(peer.ok()) << peer.status();
  (*creator)->Attach(0);
  (*peer)->Attach(1);
  Status s = (*creator)->Barrier(0, 1, milliseconds(200));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("timed out"), std::string::npos) << s;
}

}  // namespace
}  // namespace khorovod::shm
