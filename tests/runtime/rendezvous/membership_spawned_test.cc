// Membership's spawned workers: a launcher registers each worker as it starts
// its process; until that process asks for a generation (or spawn_timeout
// passes) the worker is awaited: members hear of it at once, and no
// generation freezes without it.
#include "membership_fixture.h"

namespace khorovod::rendezvous {
namespace {

class SpawnedTest : public MembershipTest {
 protected:
  MembershipPolicy SpawnPolicy() {
    MembershipPolicy p = Policy();
    p.heartbeat_timeout = Millis(5000);
    p.spawn_timeout = Millis(60000);
    return p;
  }
  void Spawn(const std::string& name, const std::string& address = "10.0.0.1",
             bool awaited = true) {
    WorkerSpec spec{name, address, 8};
    spec.spawned = true;
    spec.awaited = awaited;
    MembershipResult r = m_->Register(spec, now_);
    ASSERT_TRUE(r.ok()) << name << ": " << r.message;
  }
  // The process itself comes up: registers (no `spawned`) and asks.
  int ComeUp(const std::string& name, int64_t after = 0) {
    Register(name);
    return Await(name, after);
  }
};

TEST_F(SpawnedTest, TheFirstGenerationWaitsForEverySpawnedWorkerAndRanksInSpawnOrder) {
  Start(SpawnPolicy());
  for (const char* n : {"w0", "w1", "w2", "w3"}) Spawn(n);
  // The later spawns come up first; min_workers (1) is met long before w0 is.
  ComeUp("w3");
  ComeUp("w1");
  for (int i = 0; i < 2; ++i) {  // past the settle window and w0's heartbeat timeout
    Advance(3000);
    Beat("w1");
    Beat("w3");
  }
  ComeUp("w2");
  m_->Tick(now_);
  EXPECT_EQ(m_->generation(), 0) << "formed without the spawned w0";
  Advance(100);
  ComeUp("w0");
  Advance(100);
  m_->Tick(now_);
  ASSERT_EQ(m_->generation(), 1);
  EXPECT_EQ(WorldNames(), (std::vector<std::string>{"w0", "w1", "w2", "w3"}));
}

TEST_F(SpawnedTest, ASpawnedNewcomerIsAnnouncedAtOnceAndJoinsTheNextGeneration) {
  Start(SpawnPolicy());
  FormFirst({"a", "b"});
  Spawn("c");
  EXPECT_TRUE(Beat("a").membership_changed) << "announced before its process is up";
  EXPECT_FALSE(Beat("a").reforming);
  EXPECT_EQ(Await("a", 1), -1);
  EXPECT_EQ(Await("b", 1), -1);
  for (int i = 0; i < 2; ++i) {  // a and b keep beating; c has not come up yet
    Advance(3000);
    Beat("a");
    Beat("b");
  }
  m_->Tick(now_);
  EXPECT_EQ(m_->generation(), 1) << "re-formed without the spawned c";
  EXPECT_EQ(ComeUp("c"), -1);
  Advance(100);
  m_->Tick(now_);
  ASSERT_EQ(m_->generation(), 2);
  EXPECT_EQ(WorldNames(), (std::vector<std::string>{"a", "b", "c"}));
}

TEST_F(SpawnedTest, ASpawnedWorkerThatNeverComesUpIsWaitedForOnlySpawnTimeout) {
  MembershipPolicy p = SpawnPolicy();
  p.heartbeat_timeout = hours(10);
  Start(p);
  Spawn("w0");
  Spawn("w1");
  ComeUp("w1");
  Advance(59000);
  m_->Tick(now_);
  EXPECT_EQ(m_->generation(), 0);
  Advance(1000);
  m_->Tick(now_);  // w0 is an ordinary pending worker now: w1 forms alone after the settle window
  Advance(100);
  m_->Tick(now_);
  ASSERT_EQ(m_->generation(), 1);
  EXPECT_EQ(WorldNames(), (std::vector<std::string>{"w1"}));
}

TEST_F(SpawnedTest, AnAwaitedWorkerBeyondMaxWorkersIsNotAnnounced) {
  MembershipPolicy p = SpawnPolicy();
  p.max_workers = 2;
  Start(p);
  FormFirst({"a", "b"});
  Spawn("c");
  EXPECT_FALSE(Beat("a").membership_changed);
}

TEST_F(SpawnedTest, ANotAwaitedSpawnedWorkerOutlivesTheHeartbeatTimeoutButIsNotWaitedFor) {
  Start(SpawnPolicy());
  FormFirst({"a", "b"});
  Spawn("c", "10.0.0.1", /*awaited=*/false);
  EXPECT_FALSE(Beat("a").membership_changed);
  for (int i = 0; i < 3; ++i) {  // 9 s: longer than the heartbeat timeout
    Advance(3000);
    Beat("a");
    Beat("b");
  }
  EXPECT_FALSE(Beat("a").membership_changed);
  EXPECT_EQ(ComeUp("c"), -1);
  EXPECT_TRUE(Beat("a").membership_changed) << "announced once it is ready";
  Await("a", 1);
  Await("b", 1);
  Advance(100);
  m_->Tick(now_);
  ASSERT_EQ(m_->generation(), 2);
  EXPECT_EQ(WorldNames(), (std::vector<std::string>{"a", "b", "c"})) << "c kept its place in line";
}

TEST_F(SpawnedTest, ASpawnedWorkerThatLeftHoldsTheNextGenerationUntilItsExitIsSeen) {
  Start(SpawnPolicy());
  for (const char* n : {"w0", "w1", "w2"}) Spawn(n);
  for (const char* n : {"w0", "w1", "w2"}) ComeUp(n);
  Advance(100);
  m_->Tick(now_);
  ASSERT_EQ(m_->generation(), 1);
  ASSERT_TRUE(m_->Leave("w0", now_).ok());  // its process is still exiting
  Await("w1", 1);
  Await("w2", 1);
  Advance(1000);
  m_->Tick(now_);
  EXPECT_EQ(m_->generation(), 1) << "formed before the launcher saw w0's exit";
  ASSERT_TRUE(m_->Evict("w1", now_).ok());  // the launcher's verdict: w0's host is gone
  m_->Exited("w0", now_);
  Advance(100);
  m_->Tick(now_);
  ASSERT_EQ(m_->generation(), 2);
  EXPECT_EQ(WorldNames(), (std::vector<std::string>{"w2"}));
}

TEST_F(SpawnedTest, OnceResetsAreUsedUpASpawnedNewcomerIsNotAnnounced) {
  MembershipPolicy p = SpawnPolicy();
  p.reset_limit = 0;
  Start(p);
  FormFirst({"a"});
  Spawn("b");
  EXPECT_FALSE(Beat("a").membership_changed);
}

}  // namespace
}  // namespace khorovod::rendezvous

namespace khorovod::rendezvous {
namespace {

TEST_F(MembershipTest, AnEvictedWorkerLeavesAndCannotRejoinUnderItsName) {
  Start(Policy());
  Register("a");
  ASSERT_TRUE(m_->Register({"b", "10.0.0.1", 8, -1, "inc-b"}, now_).ok());
  Await("a", 0);
  Await("b", 0);
  Advance(100);
  m_->Tick(now_);
  ASSERT_EQ(m_->generation(), 1);
  ASSERT_TRUE(m_->Evict("b", now_).ok());
  EXPECT_TRUE(Beat("a").reforming);
  MembershipResult again = m_->Register({"b", "10.0.0.1", 8, -1, "inc-b"}, now_);
  EXPECT_EQ(again.error, MembershipError::kFenced);
  EXPECT_NE(again.message.find("removed from the job by its launcher"), std::string::npos)
      << again.message;
  EXPECT_EQ(m_->Stats(now_).failures, 0) << "an eviction is not a failure";
  EXPECT_EQ(Await("a", 1), -1);
  Advance(100);
  m_->Tick(now_);
  ASSERT_EQ(m_->generation(), 2);
  EXPECT_EQ(WorldNames(), (std::vector<std::string>{"a"}));
}

}  // namespace
}  // namespace khorovod::rendezvous
