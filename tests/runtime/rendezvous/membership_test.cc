// Membership policy, formation and joins: min/max/settle, survivor order,
// newcomers, rank assignment, generation queries.
#include <gtest/gtest.h>

#include "membership_fixture.h"

namespace khorovod::rendezvous {
namespace {

TEST_F(MembershipTest, PolicyValidation) {
  MembershipPolicy p = Policy();
  EXPECT_EQ(p.Validate(), "");
  p.max_workers = 0;
  EXPECT_NE(p.Validate(), "");
  p = Policy();
  p.blacklist_max = Millis(1);
  EXPECT_NE(p.Validate(), "");
  p = Policy();
  p.reset_limit = -2;
  EXPECT_NE(p.Validate(), "");
}

// A member leaving as finished ends the job's formations: waiting and later
// newcomers are told kJobFinishing, and the elastic timeout no longer fails
// the job. A plain leave (e.g. a host removed) does not.
TEST_F(MembershipTest, AFinishedMemberTellsLateJoinersTheJobIsFinishing) {
  MembershipPolicy p = Policy();
  p.min_workers = 3;
  p.elastic_timeout = Millis(5000);
  Start(p);
  FormFirst({"a", "b", "c"});
  ASSERT_TRUE(m_->Leave("c", now_).ok());
  EXPECT_FALSE(m_->finishing()) << "a leave that is not a finish";
  Register("late");
  EXPECT_EQ(Await("late", 0), -1);
  ASSERT_TRUE(m_->Leave("a", now_, /*finished=*/true).ok());
  EXPECT_TRUE(m_->finishing());
  NextView v;
  MembershipResult r = m_->AwaitNext("late", 0, now_, &v);
  EXPECT_EQ(r.error, MembershipError::kJobFinishing) << r.message;
  Register("later");
  r = m_->AwaitNext("later", 0, now_, &v);
  EXPECT_EQ(r.error, MembershipError::kJobFinishing) << r.message;
  EXPECT_EQ(Await("b", 0), 1) << "a member still gets the generation it belongs to";
  ASSERT_TRUE(m_->Leave("b", now_, /*finished=*/true).ok());
  Advance(60000);
  m_->Tick(now_);
  EXPECT_FALSE(m_->failed()) << "a finishing job does not fail for lack of workers";
  EXPECT_EQ(m_->generation(), 1) << "nothing forms after the finish";
}

TEST_F(MembershipTest, FirstGenerationWaitsForMinWorkersThenTheSettleWindow) {
  MembershipPolicy p = Policy();
  p.min_workers = 2;
  Start(p);
  Register("a");
  EXPECT_EQ(Await("a", 0), -1);
  Advance(1000);
  m_->Tick(now_);
  EXPECT_EQ(m_->generation(), 0) << "one worker is below min";
  EXPECT_EQ(m_->state(), JobState::kForming);
  Register("b");
  EXPECT_EQ(Await("b", 0), -1) << "min reached: the settle window starts";
  Advance(99);
  m_->Tick(now_);
  EXPECT_EQ(m_->generation(), 0);
  Advance(1);
  m_->Tick(now_);
  EXPECT_EQ(m_->generation(), 1);
  EXPECT_EQ(WorldNames(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Await("a", 0), 0);
  EXPECT_EQ(Await("b", 0), 1);
  EXPECT_EQ(m_->Stats(now_).last_formation, Millis(1100)) << "timed from the first ready worker";
}

TEST_F(MembershipTest, NearSimultaneousStartersLandInOneGeneration) {
  Start(Policy());
  Register("a");
  Await("a", 0);
  Advance(50);
  Register("b");
  Await("b", 0);
  Advance(49);
  Register("c");
  Await("c", 0);
  Advance(1);
  m_->Tick(now_);
  EXPECT_EQ(WorldNames(), (std::vector<std::string>{"a", "b", "c"}));
}

TEST_F(MembershipTest, ARegisteredWorkerThatHasNotAskedIsNotAdmitted) {
  Start(Policy());
  Register("a");
  Register("b");
  Await("a", 0);
  Advance(100);
  m_->Tick(now_);
  EXPECT_EQ(WorldNames(), (std::vector<std::string>{"a"}));
  EXPECT_EQ(m_->PendingNames(), (std::vector<std::string>{"b"}));
}

TEST_F(MembershipTest, MaxWorkersFreezesAtOnceAndExtraWorkersWait) {
  MembershipPolicy p = Policy();
  p.max_workers = 2;
  p.settle = Millis(10'000);
  Start(p);
  for (const char* n : {"a", "b", "c"}) Register(n);
  Await("a", 0);
  Await("b", 0);
  EXPECT_EQ(m_->generation(), 1) << "full: no settle wait";
  EXPECT_EQ(Await("c", 0), -1);
  Advance(20'000);
  m_->Tick(now_);
  EXPECT_EQ(m_->generation(), 1);
  EXPECT_FALSE(Beat("a").membership_changed) << "the extra worker cannot be admitted";
  EXPECT_FALSE(Beat("c").member);
  // Once a member leaves, the waiting worker takes its place.
  ASSERT_TRUE(m_->Leave("a", now_).ok());
  EXPECT_TRUE(Beat("b").membership_changed);
  EXPECT_EQ(Await("b", 1), 0);
  EXPECT_EQ(Await("c", 0), 1);
  EXPECT_EQ(WorldNames(), (std::vector<std::string>{"b", "c"}));
}

TEST_F(MembershipTest, SurvivorsKeepTheirOrderAndTheOldestBecomesRankZero) {
  Start(Policy());
  FormFirst({"a", "b", "c", "d"});
  Register("e");  // a newcomer that registered before the survivors re-asked
  Await("e", 0);
  ASSERT_TRUE(m_->ReportFailure("a", "segfault", now_).ok());
  for (const char* n : {"b", "c", "d"}) EXPECT_TRUE(Beat(n).membership_changed) << n;
  EXPECT_EQ(m_->state(), JobState::kReforming);
  // Survivors ask in reverse order; the order of asking does not matter.
  for (const char* n : {"d", "c", "b"}) EXPECT_EQ(Await(n, 1), -1);
  Advance(100);
  m_->Tick(now_);
  ASSERT_EQ(m_->generation(), 2);
  EXPECT_EQ(WorldNames(), (std::vector<std::string>{"b", "c", "d", "e"}));
  EXPECT_EQ(Await("b", 1), 0);
  EXPECT_EQ(Await("e", 0), 3);
  EXPECT_EQ(m_->Stats(now_).resets, 1);
}

TEST_F(MembershipTest, NewcomersAreAppendedInArrivalOrderAfterTheRunningWorkersAsk) {
  Start(Policy());
  FormFirst({"a", "b"});
  EXPECT_FALSE(Beat("a").membership_changed);
  Register("d");
  Register("c");
  Await("c", 0);
  Await("d", 0);
  Advance(60'000);
  m_->Tick(now_);
  EXPECT_EQ(m_->generation(), 1) << "a newcomer alone does not disturb the running generation";
  EXPECT_EQ(m_->state(), JobState::kRunning);
  EXPECT_TRUE(Beat("a").membership_changed);
  EXPECT_TRUE(Beat("b").membership_changed);
  EXPECT_EQ(Await("a", 1), -1);
  Advance(1000);
  m_->Tick(now_);
  EXPECT_EQ(m_->generation(), 1) << "b has not asked yet";
  EXPECT_EQ(Await("b", 1), -1);
  Advance(100);
  m_->Tick(now_);
  ASSERT_EQ(m_->generation(), 2);
  EXPECT_EQ(WorldNames(), (std::vector<std::string>{"a", "b", "d", "c"}));
  EXPECT_FALSE(Beat("a").membership_changed);
}

TEST_F(MembershipTest, RegisteringAPendingWorkerAgainIsIdempotent) {
  Start(Policy());
  Register("a");
  Register("b");
  Register("a");
  EXPECT_EQ(m_->PendingNames(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(m_->Stats(now_).failures, 0);
}

TEST_F(MembershipTest, LocalAndCrossRanksFollowAddresses) {
  Start(Policy());
  Register("h1-a", "host1", 2);
  Register("h2-a", "host2", 2);
  Register("h1-b", "host1", 2);
  Register("h2-b", "host2", 2);
  Register("h1-c", "host1", 2);  // beyond host1's 2 slots: waits
  for (const char* n : {"h1-a", "h2-a", "h1-b", "h2-b", "h1-c"}) Await(n, 0);
  Advance(100);
  m_->Tick(now_);
  auto w = m_->world();
  ASSERT_TRUE(w);
  ASSERT_EQ(w->size, 4);
  EXPECT_EQ(w->cross_size, 2);
  struct Want {
    const char* name;
    int local_rank, local_size, cross_rank;
  } want[] = {{"h1-a", 0, 2, 0}, {"h2-a", 0, 2, 1}, {"h1-b", 1, 2, 0}, {"h2-b", 1, 2, 1}};
  for (int r = 0; r < 4; ++r) {
    const Assignment& a = w->members[static_cast<size_t>(r)];
    EXPECT_EQ(a.name, want[r].name);
    EXPECT_EQ(a.rank, r);
    EXPECT_EQ(a.local_rank, want[r].local_rank) << a.name;
    EXPECT_EQ(a.local_size, want[r].local_size) << a.name;
    EXPECT_EQ(a.cross_rank, want[r].cross_rank) << a.name;
  }
  EXPECT_EQ(m_->PendingNames(), (std::vector<std::string>{"h1-c"}));
}

TEST_F(MembershipTest, AllMembersAskingWithoutALossReformsTheSameWorld) {
  Start(Policy());
  FormFirst({"a", "b"});
  Await("b", 1);  // e.g. a collective failed on b first
  EXPECT_TRUE(Beat("a").membership_changed);
  Await("a", 1);
  Advance(100);
  m_->Tick(now_);
  EXPECT_EQ(m_->generation(), 2);
  EXPECT_EQ(WorldNames(), (std::vector<std::string>{"a", "b"}));
}

TEST_F(MembershipTest, GenerationQueriesAreCheckedAndRetriesAnswerAtOnce) {
  Start(Policy());
  Register("a");
  NextView v;
  EXPECT_EQ(m_->AwaitNext("a", 5, now_, &v).error, MembershipError::kBadGeneration);
  EXPECT_EQ(m_->AwaitNext("nobody", 0, now_, &v).error, MembershipError::kUnknownWorker);
  EXPECT_EQ(m_->AwaitNext("a", -1, now_, &v).error, MembershipError::kInvalidArgument);
  EXPECT_EQ(Await("a", 0), -1);
  Advance(100);
  m_->Tick(now_);
  EXPECT_EQ(Await("a", 0), 0) << "a retried request gets generation 1 again";
  EXPECT_EQ(Await("a", 0), 0);
  EXPECT_FALSE(Beat("a").membership_changed)
      << "retries of an old generation do not ask for a new one";
}

TEST_F(MembershipTest, InvalidRegistrationsAreRejected) {
  Start(Policy());
  EXPECT_EQ(m_->Register({"", "h", 1}, now_).error, MembershipError::kInvalidArgument);
  EXPECT_EQ(m_->Register({"a/b", "h", 1}, now_).error, MembershipError::kInvalidArgument);
  EXPECT_EQ(m_->Register({"-a", "h", 1}, now_).error, MembershipError::kInvalidArgument);
  EXPECT_EQ(m_->Register({"a", "", 1}, now_).error, MembershipError::kInvalidArgument);
  EXPECT_EQ(m_->Register({"a", "h", 0}, now_).error, MembershipError::kInvalidArgument);
  EXPECT_EQ(m_->Stats(now_).registered, 0);
}

// `reforming` tells members that their generation can no longer finish a
// collective (the worker then abandons its mesh): a lost member or a member
// back at the rendezvous sets it; a newcomer waiting for admission, or a
// member that left because training finished, does not.
TEST_F(MembershipTest, ReformingMeansTheGenerationCanNoLongerFinish) {
  Start(Policy());
  FormFirst({"a", "b", "c"});
  Register("d");
  Await("d", 0);
  EXPECT_TRUE(Beat("a").membership_changed);
  EXPECT_FALSE(Beat("a").reforming) << "a newcomer waits for the next commit";
  EXPECT_EQ(Await("b", 1), -1);
  EXPECT_TRUE(Beat("a").reforming) << "b went back to the rendezvous";
}

TEST_F(MembershipTest, ALostMemberSetsReformingUnlessTheJobIsFinishing) {
  Start(Policy());
  FormFirst({"a", "b", "c"});
  ASSERT_TRUE(m_->ReportFailure("c", "killed", now_).ok());
  EXPECT_TRUE(Beat("a").reforming);

  Start(Policy());
  FormFirst({"a", "b", "c"});
  ASSERT_TRUE(m_->Leave("c", now_, /*finished=*/true).ok());
  EXPECT_FALSE(Beat("a").reforming) << "the others are finishing their last steps";
}

}  // namespace
}  // namespace khorovod::rendezvous
