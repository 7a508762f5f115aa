// Membership policy, losses: heartbeat and reform timeouts, dropping below
// min, the elastic timeout, blacklisting, restarts and the reset limit.
#include <gtest/gtest.h>

#include "membership_fixture.h"

namespace khorovod::rendezvous {
namespace {

TEST_F(MembershipTest, HeartbeatTimeoutRemovesAWorker) {
  MembershipPolicy p = Policy();
  p.heartbeat_timeout = Millis(5000);
  Start(p);
  FormFirst({"a", "b"});
  Advance(4000);
  Beat("a");
  Advance(1000);
  m_->Tick(now_);
  HeartbeatView v;
  EXPECT_EQ(m_->Heartbeat("b", now_, &v).error, MembershipError::kUnknownWorker);
  EXPECT_TRUE(Beat("a").membership_changed);
  EXPECT_EQ(m_->Stats(now_).failures, 1);
  EXPECT_EQ(Await("a", 1), -1);
  Advance(100);
  m_->Tick(now_);
  EXPECT_EQ(WorldNames(), (std::vector<std::string>{"a"}));
}

TEST_F(MembershipTest, AWaitingWorkerCountsAsAlive) {
  MembershipPolicy p = Policy();
  p.heartbeat_timeout = Millis(5000);
  p.min_workers = 2;
  Start(p);
  Register("a");
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(Await("a", 0), -1);
    Advance(4000);
  }
  EXPECT_EQ(m_->Stats(now_).registered, 1);
}

TEST_F(MembershipTest, DroppingBelowMinWaitsForNewcomersThenRecovers) {
  MembershipPolicy p = Policy();
  p.min_workers = 2;
  p.elastic_timeout = Millis(60'000);
  Start(p);
  FormFirst({"a", "b"});
  ASSERT_TRUE(m_->Leave("b", now_).ok());
  EXPECT_EQ(Await("a", 1), -1);
  Advance(59'000);
  m_->Tick(now_);
  Beat("a");
  EXPECT_EQ(m_->generation(), 1);
  EXPECT_NE(m_->state(), JobState::kFailed);
  Register("c");
  Await("c", 0);
  Advance(100);
  m_->Tick(now_);
  EXPECT_EQ(WorldNames(), (std::vector<std::string>{"a", "c"}));
  Advance(60'000);
  m_->Tick(now_);
  EXPECT_NE(m_->state(), JobState::kFailed) << "the elastic timer stopped once min was reached";
}

TEST_F(MembershipTest, ElasticTimeoutFailsTheJob) {
  MembershipPolicy p = Policy();
  p.min_workers = 2;
  p.elastic_timeout = Millis(60'000);
  Start(p);
  FormFirst({"a", "b"});
  ASSERT_TRUE(m_->ReportFailure("b", "oom", now_).ok());
  Await("a", 1);
  Advance(60'000);
  m_->Tick(now_);
  EXPECT_EQ(m_->state(), JobState::kFailed);
  EXPECT_NE(m_->failure_reason().find("elastic timeout"), std::string::npos)
      << m_->failure_reason();
  HeartbeatView hv;
  EXPECT_EQ(m_->Heartbeat("a", now_, &hv).error, MembershipError::kJobFailed);
  NextView nv;
  EXPECT_EQ(m_->AwaitNext("a", 1, now_, &nv).error, MembershipError::kJobFailed);
  EXPECT_EQ(m_->Register({"z", "h", 1}, now_).error, MembershipError::kJobFailed);
  EXPECT_EQ(m_->Leave("a", now_).error, MembershipError::kJobFailed);
}

TEST_F(MembershipTest, StartupWaitsAtMostTheElasticTimeout) {
  MembershipPolicy p = Policy();
  p.min_workers = 3;
  p.elastic_timeout = Millis(1000);
  Start(p);
  Register("a");
  Advance(999);
  m_->Tick(now_);
  EXPECT_EQ(m_->state(), JobState::kForming);
  Advance(1);
  m_->Tick(now_);
  EXPECT_EQ(m_->state(), JobState::kFailed);
}

TEST_F(MembershipTest, RepeatedFailuresBlacklistWithExponentialCooldown) {
  MembershipPolicy p = Policy();
  p.blacklist_threshold = 2;
  p.blacklist_base = Millis(1000);
  p.blacklist_max = Millis(4000);
  Start(p);
  Register("a");
  ASSERT_TRUE(m_->ReportFailure("a", "x", now_).ok());
  Register("a");  // the first failure is forgiven
  const int64_t expected[] = {1000, 2000, 4000, 4000};
  for (int64_t cooldown : expected) {
    ASSERT_TRUE(m_->ReportFailure("a", "x", now_).ok());
    MembershipResult r = m_->Register({"a", "10.0.0.1", 1}, now_);
    EXPECT_EQ(r.error, MembershipError::kBlacklisted);
    EXPECT_EQ(r.retry_after, Millis(cooldown));
    EXPECT_NE(r.message.find("blacklisted"), std::string::npos);
    EXPECT_EQ(m_->Stats(now_).blacklisted, 1);
    Advance(cooldown - 1);
    EXPECT_EQ(m_->Register({"a", "10.0.0.1", 1}, now_).retry_after, Millis(1));
    Advance(1);
    Register("a");
    EXPECT_EQ(m_->Stats(now_).blacklisted, 0);
  }
  Register("b");  // other names are unaffected
}

TEST_F(MembershipTest, RestartedMemberIsAFailureAndANewcomer) {
  Start(Policy());
  FormFirst({"a", "b"});
  Register("b");  // b crashed and came back
  EXPECT_EQ(m_->Stats(now_).failures, 1);
  EXPECT_TRUE(Beat("a").membership_changed);
  EXPECT_FALSE(Beat("b").member);
  Await("a", 1);
  Await("b", 0);
  Advance(100);
  m_->Tick(now_);
  EXPECT_EQ(WorldNames(), (std::vector<std::string>{"a", "b"}));
}

TEST_F(MembershipTest, ResetLimitFailsTheJob) {
  MembershipPolicy p = Policy();
  p.reset_limit = 1;
  Start(p);
  FormFirst({"a", "b", "c"});
  ASSERT_TRUE(m_->ReportFailure("c", "x", now_).ok());
  Await("a", 1);
  Await("b", 1);
  Advance(100);
  m_->Tick(now_);
  ASSERT_EQ(m_->generation(), 2) << "the first reset is allowed";
  Register("d");
  Await("d", 0);
  EXPECT_FALSE(Beat("a").membership_changed) << "no resets left: a newcomer does not ask for one";
  ASSERT_TRUE(m_->ReportFailure("b", "x", now_).ok());
  EXPECT_TRUE(Beat("a").membership_changed);
  NextView v;
  EXPECT_EQ(m_->AwaitNext("a", 2, now_, &v).error, MembershipError::kJobFailed);
  EXPECT_EQ(m_->state(), JobState::kFailed);
  EXPECT_NE(m_->failure_reason().find("reset limit"), std::string::npos) << m_->failure_reason();
  EXPECT_EQ(m_->AwaitNext("d", 0, now_, &v).error, MembershipError::kJobFailed);
}

TEST_F(MembershipTest, ReformTimeoutRemovesMembersThatNeverAsk) {
  MembershipPolicy p = Policy();
  p.reform_timeout = Millis(30'000);
  Start(p);
  FormFirst({"a", "b", "c"});
  ASSERT_TRUE(m_->ReportFailure("c", "x", now_).ok());
  Await("a", 1);
  Advance(29'999);
  Beat("b");
  m_->Tick(now_);
  EXPECT_EQ(m_->generation(), 1);
  Advance(1);
  m_->Tick(now_);
  HeartbeatView v;
  EXPECT_EQ(m_->Heartbeat("b", now_, &v).error, MembershipError::kUnknownWorker);
  Advance(100);
  m_->Tick(now_);
  EXPECT_EQ(WorldNames(), (std::vector<std::string>{"a"}));
}

}  // namespace
}  // namespace khorovod::rendezvous
