// ShmSegment's barrier against peers that are not there: a rank that let go
// of the segment (left its generation) or never arrives. Both ranks live in
// this process, so only the departure mark, not a dead pid, can end a wait.
#include "backend/shm/shm_segment.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace khorovod::shm {
namespace {

using std::chrono::milliseconds;

// Ranks 0 and 1 of one two-rank segment, both in this process, attached.
struct AttachedPair {
  std::unique_ptr<ShmSegment> creator, peer;
};
AttachedPair Attached() {
  AttachedPair p;
  auto creator = ShmSegment::Create(2, 4096);
  EXPECT_TRUE(creator.ok()) << creator.status();
  if (!creator.ok()) return p;
  auto peer = ShmSegment::Open((*creator)->name(), 2, 4096);
  EXPECT_TRUE(peer.ok()) << peer.status();
  if (!peer.ok()) return p;
  p.creator = std::move(*creator);
  p.peer = std::move(*peer);
  p.creator->Attach(0);
  p.peer->Attach(1);
  return p;
}

TEST(ShmSegment, BarrierPassesOnceEveryRankArrived) {
  auto [creator, peer] = Attached();
  ASSERT_TRUE(creator && peer);
  std::thread other([&] { EXPECT_TRUE(peer->Barrier(1, 1, milliseconds(10'000)).ok()); });
  EXPECT_TRUE(creator->Barrier(0, 1, milliseconds(10'000)).ok());
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
  auto [creator, peer] = Attached();
  ASSERT_TRUE(creator && peer);
  Status s = creator->Barrier(0, 1, milliseconds(200));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("timed out"), std::string::npos) << s;
}

// The futex sleep (spinning off, as on an oversubscribed host): a waiter
// asleep on its peer's counter is woken by the arrival, not only by its
// liveness poll, and no wake-up is lost over many generations.
TEST(ShmSegment, ASleepingWaiterIsWokenByTheArrival) {
  auto [creator, peer] = Attached();
  ASSERT_TRUE(creator && peer);
  creator->SetSpin(false);
  peer->SetSpin(false);
  std::thread late([&] {
    std::this_thread::sleep_for(milliseconds(100));
    EXPECT_TRUE(peer->Barrier(1, 1, milliseconds(10'000)).ok());
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(creator->Barrier(0, 1, milliseconds(10'000)).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(90));
  late.join();
}

TEST(ShmSegment, ManyGenerationsWithoutSpinningLoseNoWakeUp) {
  constexpr int kRanks = 3;
  constexpr uint64_t kGenerations = 2000;
  auto creator = ShmSegment::Create(kRanks, 64);
  ASSERT_TRUE(creator.ok()) << creator.status();
  std::vector<std::unique_ptr<ShmSegment>> segs;
  segs.push_back(std::move(*creator));
  for (int r = 1; r < kRanks; ++r) {
    auto s = ShmSegment::Open(segs[0]->name(), kRanks, 64);
    ASSERT_TRUE(s.ok()) << s.status();
    segs.push_back(std::move(*s));
  }
  for (int r = 0; r < kRanks; ++r) {
    segs[r]->Attach(r);
    segs[r]->SetSpin(false);
  }
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      for (uint64_t g = 1; g <= kGenerations; ++g) {
        if (!segs[r]->Barrier(r, g, milliseconds(20'000)).ok()) {
          failures.fetch_add(1);
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  // A lost wake-up costs a whole liveness poll (10 ms): 2000 of them would
  // take 20 s; prompt wake-ups take a small fraction of that.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(8));
}

TEST(ShmSegment, WithoutSpinningADepartedPeerStillEndsTheWait) {
  auto creator = ShmSegment::Create(2, 4096);
  ASSERT_TRUE(creator.ok()) << creator.status();
  (*creator)->Attach(0);
  (*creator)->SetSpin(false);
  auto peer = ShmSegment::Open((*creator)->name(), 2, 4096);
  ASSERT_TRUE(peer.ok()) << peer.status();
  (*peer)->Attach(1);
  std::thread leaver([&] {
    std::this_thread::sleep_for(milliseconds(100));
    peer->reset();  // lets go while rank 0 sleeps on its counter
  });
  const auto start = std::chrono::steady_clock::now();
  Status s = (*creator)->Barrier(0, 1, milliseconds(20'000));
  leaver.join();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("left the generation"), std::string::npos) << s;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(ShmSegment, WithoutSpinningARankThatNeverArrivesTimesOutOnTime) {
  auto [creator, peer] = Attached();
  ASSERT_TRUE(creator && peer);
  creator->SetSpin(false);
  const auto start = std::chrono::steady_clock::now();
  Status s = creator->Barrier(0, 1, milliseconds(200));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("timed out"), std::string::npos) << s;
  EXPECT_GE(took, milliseconds(200));
  EXPECT_LT(took, std::chrono::seconds(5));
}

}  // namespace
}  // namespace khorovod::shm
