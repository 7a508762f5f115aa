// Fencing (membership.h): a worker declared lost can neither pass for the
// process that took its name nor come back under its old identity.
#include "membership_fixture.h"

namespace khorovod::rendezvous {
namespace {

class FencingTest : public MembershipTest {
 protected:
  void RegisterAs(const std::string& name, const std::string& incarnation) {
    MembershipResult r = m_->Register({name, "10.0.0.1", 8, -1, incarnation}, now_);
    ASSERT_TRUE(r.ok()) << name << "/" << incarnation << ": " << r.message;
  }
  // Generation 1 of w0 and w1 (incarnations a and b), heartbeat timeout 1 s.
  void FormTwo(const std::string& a, const std::string& b) {
    MembershipPolicy p = Policy();
    p.heartbeat_timeout = Millis(1000);
    Start(p);
    RegisterAs("w0", a);
    RegisterAs("w1", b);
    Await("w0", 0);
    Await("w1", 0);
    Advance(100);
    m_->Tick(now_);
    ASSERT_EQ(m_->generation(), 1);
  }
  MembershipError Check(const std::string& name, const std::string& incarnation) {
    return m_->CheckIncarnation(name, incarnation).error;
  }
};

TEST_F(FencingTest, AWorkerLostToItsHeartbeatIsFencedAndItsReplacementIsNot) {
  FormTwo("old0", "inc1");
  EXPECT_EQ(Check("w0", "old0"), MembershipError::kOk);

  // w0 goes silent (its node is cut off); w1 keeps beating.
  for (int i = 0; i < 3; ++i) {
    Advance(400);
    Beat("w1");
  }
  ASSERT_EQ(WorldNames(), (std::vector<std::string>{"w0", "w1"}));
  EXPECT_EQ(Check("w0", "old0"), MembershipError::kFenced) << "lost to its heartbeat timeout";

  // Its replacement registers under the same name with a new incarnation.
  RegisterAs("w0", "new0");
  EXPECT_EQ(Check("w0", "new0"), MembershipError::kOk);
  // The zombie comes back: every call with its incarnation is refused, and
  // so is a registration with it, so it cannot displace the replacement.
  EXPECT_EQ(Check("w0", "old0"), MembershipError::kFenced);
  MembershipResult again = m_->Register({"w0", "10.0.0.9", 8, -1, "old0"}, now_);
  EXPECT_EQ(again.error, MembershipError::kFenced) << again.message;
  EXPECT_NE(again.message.find("declared lost"), std::string::npos) << again.message;
  EXPECT_EQ(m_->PendingNames(), (std::vector<std::string>{"w0"}));
  EXPECT_EQ(Check("w0", "new0"), MembershipError::kOk) << "the replacement keeps its registration";

  // The replacement is admitted in the next generation, with its own address.
  Await("w1", 1);
  Await("w0", 0);
  Advance(100);
  m_->Tick(now_);
  ASSERT_EQ(m_->generation(), 2);
  EXPECT_EQ(WorldNames(), (std::vector<std::string>{"w1", "w0"}));
  EXPECT_EQ(m_->world()->Find("w0")->address, "10.0.0.1");
}

TEST_F(FencingTest, ANewIncarnationOfAMemberFencesTheOldOne) {
  Start(Policy());
  RegisterAs("w0", "a");
  Await("w0", 0);
  Advance(100);
  m_->Tick(now_);
  ASSERT_EQ(m_->generation(), 1);
  RegisterAs("w0", "b");  // the pod was re-created while the old process was still counted in
  EXPECT_EQ(Check("w0", "a"), MembershipError::kFenced);
  EXPECT_EQ(Check("w0", "b"), MembershipError::kOk);
  // A pending worker replaced by a new process is fenced too.
  RegisterAs("w0", "c");
  EXPECT_EQ(Check("w0", "b"), MembershipError::kFenced);
  // The same incarnation registering again is an idempotent retry.
  RegisterAs("w0", "c");
  EXPECT_EQ(Check("w0", "c"), MembershipError::kOk);
}

TEST_F(FencingTest, CallsWithoutAnIncarnationAndGracefulLeavesAreNotFenced) {
  Start(Policy());
  RegisterAs("w0", "a");
  EXPECT_EQ(Check("w0", ""), MembershipError::kOk)
      << "old clients and khorovodrun's reports carry none";
  ASSERT_TRUE(m_->Leave("w0", now_).ok());
  EXPECT_EQ(Check("w0", "a"), MembershipError::kOk) << "a worker that left was not lost";
  RegisterAs("w0", "a");
  ASSERT_TRUE(m_->ReportFailure("w0", "crashed", now_).ok());
  EXPECT_EQ(Check("w0", "a"), MembershipError::kFenced);
  RegisterAs("w1", "");  // no incarnation: never fenced
  ASSERT_TRUE(m_->ReportFailure("w1", "crashed", now_).ok());
  RegisterAs("w1", "");
}

TEST_F(FencingTest, TheFenceKeepsABoundedNumberOfIncarnationsPerName) {
  Start(Policy());
  for (int i = 0; i < 20; ++i) {
    const std::string inc = "i" + std::to_string(i);
    RegisterAs("w0", inc);
    ASSERT_TRUE(m_->ReportFailure("w0", "crash", now_).ok());
    Advance(100000);  // past the blacklist cooldown
  }
  EXPECT_EQ(Check("w0", "i19"), MembershipError::kFenced);
  EXPECT_EQ(Check("w0", "i12"), MembershipError::kFenced);
  EXPECT_EQ(Check("w0", "i0"), MembershipError::kOk) << "the oldest fell out of the bounded list";
}

// The detection phase the service exports: how long each worker removed as
// a failure had been silent, and how it was found.
TEST_F(FencingTest, LossesSayHowLongTheWorkerWasSilentAndHowItWasFound) {
  FormTwo("a", "b");
  Advance(200);
  ASSERT_TRUE(m_->ReportFailure("w1", "crash", now_).ok());
  RegisterAs("w0", "a2");  // the member's pod was re-created: a new process
  Advance(1000);           // the new w0 stays silent
  m_->Tick(now_);
  std::vector<Membership::Loss> losses = m_->TakeLosses();
  ASSERT_EQ(losses.size(), 3u);
  EXPECT_EQ(losses[0].reason, LossReason::kReported);
  EXPECT_EQ(losses[0].silent, Millis(300));
  EXPECT_EQ(losses[1].reason, LossReason::kReplaced);
  EXPECT_EQ(losses[1].silent, Millis(300));
  EXPECT_EQ(losses[2].reason, LossReason::kHeartbeat);
  EXPECT_EQ(losses[2].silent, Millis(1000));
  EXPECT_STREQ(LossReasonName(losses[2].reason), "heartbeat");
  EXPECT_TRUE(m_->TakeLosses().empty()) << "drained";
  RegisterAs("w2", "c");
  ASSERT_TRUE(m_->Leave("w2", now_).ok());
  EXPECT_TRUE(m_->TakeLosses().empty()) << "a graceful leave is no loss";
}

}  // namespace
}  // namespace khorovod::rendezvous
