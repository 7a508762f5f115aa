// Coordinator: no stall error however long a tensor waits, Pending() for the stall inspector, and
// join.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "coord_common.h"
#include "core/coordinator.h"
#include "test_util.h"

namespace khorovod {
namespace {

using namespace std::chrono_literals;
using testing::Allreduce;
using testing::HasSubstr;
using testing::kT0;
using testing::MakeRequest;
using testing::Names;

Request Join(int rank) { return MakeRequest(rank, OpType::kJoin, "khorovod.join", {}); }

TEST(CoordinatorStall, AWaitingTensorNeverFailsHoweverLongItWaits) {
  // Horovod only warns about a slow rank (core/stall_inspector.h decides
  // about warnings and shutdown); the coordinator keeps waiting.
  Coordinator c(4);
  c.Add(Allreduce(2, "a"), kT0);
  c.Add(Allreduce(0, "a"), kT0 + 10ms);
  EXPECT_TRUE(c.Collect().empty());
  c.Add(Allreduce(1, "a"), kT0 + 25h);
  c.Add(Allreduce(3, "a"), kT0 + 25h);
  std::vector<Response> out = c.Collect();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kExecute);
  EXPECT_TRUE(c.empty());
}

TEST(CoordinatorStall, PendingNamesTheMissingRanksAndTheFirstSighting) {
  Coordinator c(4);
  c.Add(Allreduce(2, "a"), kT0);
  c.Add(Allreduce(0, "a"), kT0 + 900ms);  // later submissions do not reset the clock
  c.Add(Allreduce(3, "b"), kT0 + 500ms);
  EXPECT_TRUE(c.Collect().empty());
  std::vector<PendingTensor> pending = c.Pending();
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[0].name, "a");
  EXPECT_EQ(pending[0].missing_ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(pending[0].first_seen, kT0);
  EXPECT_EQ(pending[1].name, "b");
  EXPECT_EQ(pending[1].missing_ranks, (std::vector<int>{0, 1, 2}));
}

TEST(CoordinatorStall, GroupMemberWaitingForTheRestOfItsGroupHasNoMissingRank) {
  Coordinator c(2);
  Request g1 = Allreduce(0, "g1"), g2 = Allreduce(0, "g2");
  g1.group = g2.group = "g";
  g1.group_size = g2.group_size = 2;
  c.Add(g1, kT0);
  g1.rank = 1;
  c.Add(g1, kT0);
  c.Add(g2, kT0 + 600ms);  // only rank 0
  EXPECT_TRUE(c.Collect().empty());
  std::vector<PendingTensor> pending = c.Pending();
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_TRUE(pending[0].missing_ranks.empty());
  EXPECT_EQ(pending[1].missing_ranks, std::vector<int>{1});
}

TEST(CoordinatorJoin, AllreduceBecomesReadyWhenTheMissingRanksJoined) {
  Coordinator c(3);
  c.Add(Allreduce(0, "a", {2, 2}), kT0);
  c.Add(Allreduce(1, "a", {2, 2}), kT0);
  EXPECT_TRUE(c.Collect().empty());
  c.Add(Join(2), kT0);
  std::vector<Response> out = c.Collect();
  ASSERT_EQ(out.size(), 1u) << "no join response until every rank joined";
  EXPECT_EQ(out[0].kind, Response::Kind::kExecute);
  EXPECT_EQ(out[0].names, std::vector<std::string>{"a"});
  EXPECT_EQ(out[0].sizes, std::vector<int64_t>{4});
  // A later allreduce from the remaining ranks is ready without rank 2.
  c.Add(Allreduce(1, "b"), kT0);
  EXPECT_TRUE(c.Collect().empty());
  c.Add(Allreduce(0, "b"), kT0);
  EXPECT_EQ(Names(c.Collect()), std::vector<std::string>{"b"});
}

TEST(CoordinatorJoin, JoinedRanksAreNotMissing) {
  Coordinator c(3);
  c.Add(Join(2), kT0);
  c.Add(Allreduce(0, "a"), kT0);
  EXPECT_TRUE(c.Collect().empty());
  std::vector<PendingTensor> pending = c.Pending();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].missing_ranks, std::vector<int>{1});
}

TEST(CoordinatorJoin, OtherCollectivesWithAJoinedRankFail) {
  for (OpType op : {OpType::kAllgather, OpType::kBroadcast, OpType::kAlltoall,
                    OpType::kReducescatter, OpType::kBarrier}) {
    SCOPED_TRACE(std::string(OpTypeName(op)));
    Coordinator c(3);
    c.Add(Join(1), kT0);
    c.Add(MakeRequest(0, op, "t", {6, 2}), kT0);
    c.Add(MakeRequest(2, op, "t", {6, 2}), kT0);
    std::vector<Response> out = c.Collect();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].kind, Response::Kind::kError);
    EXPECT_NE(out[0].error_code, StatusCode::kOk);
    EXPECT_EQ(out[0].names, std::vector<std::string>{"t"});
    EXPECT_EQ(out[0].op, op);
    EXPECT_TRUE(HasSubstr(out[0].error_message, "rank 1 has joined"));
    EXPECT_TRUE(c.empty());
  }
}

TEST(CoordinatorJoin, OtherCollectivesFailAtOnceWithoutWaitingForTheOtherRanks) {
  // Ranks whose unnamed-call counters drifted apart submit different names;
  // neither may wait for the other while rank 1 has joined (Horovod's
  // test_horovod_join_allgather at 4 ranks hung on this).
  Coordinator c(3);
  c.Add(Join(1), kT0);
  c.Add(MakeRequest(0, OpType::kAllgather, "allgather.noname.1", {6, 2}), kT0);
  c.Add(MakeRequest(2, OpType::kAllgather, "allgather.noname.2", {6, 2}), kT0);
  std::vector<Response> out = c.Collect();
  ASSERT_EQ(out.size(), 2u);
  for (const Response& r : out) {
    EXPECT_EQ(r.kind, Response::Kind::kError);
    EXPECT_EQ(r.error_code, StatusCode::kFailedPrecondition) << r.error_message;
  }
  EXPECT_TRUE(c.empty());
  // An allreduce still waits for every rank that has not joined.
  c.Add(MakeRequest(0, OpType::kAllreduce, "sum", {2}), kT0);
  EXPECT_TRUE(c.Collect().empty());
}

TEST(CoordinatorJoin, OtherCollectivesWithAJoinedRankFailWithFailedPrecondition) {
  // runtime.h, Runtime::join: "other collectives fail with
  // kFailedPrecondition while a rank is joined".
  Coordinator c(2);
  c.Add(Join(1), kT0);
  c.Add(MakeRequest(0, OpType::kBroadcast, "t", {3}), kT0);
  std::vector<Response> out = c.Collect();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].error_code, StatusCode::kFailedPrecondition) << out[0].error_message;
}

TEST(CoordinatorJoin, OneJoinResponseOnceEveryRankJoined) {
  Coordinator c(3);
  c.Add(Join(1), kT0);
  c.Add(Join(0), kT0);
  EXPECT_TRUE(c.Collect().empty());
  c.Add(Join(1), kT0);  // joining twice counts once
  EXPECT_TRUE(c.Collect().empty());
  c.Add(Join(2), kT0);
  std::vector<Response> out = c.Collect();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].op, OpType::kJoin);
  EXPECT_EQ(out[0].kind, Response::Kind::kExecute);
  EXPECT_EQ(out[0].join_last_rank, 2);
  EXPECT_EQ(out[0].names, std::vector<std::string>{"khorovod.join"});
  EXPECT_TRUE(c.Collect().empty()) << "exactly one join response";

  // The join state was reset: allreduces need every rank again.
  c.Add(Allreduce(0, "a"), kT0);
  c.Add(Allreduce(1, "a"), kT0);
  EXPECT_TRUE(c.Collect().empty());
}

TEST(CoordinatorJoin, PendingAllreduceIsReleasedBeforeTheJoinResponse) {
  Coordinator c(2);
  c.Add(Allreduce(0, "a"), kT0);
  c.Add(Join(0), kT0);
  EXPECT_TRUE(c.Collect().empty());
  c.Add(Join(1), kT0);
  std::vector<Response> out = c.Collect();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].names, std::vector<std::string>{"a"});
  EXPECT_EQ(out[0].kind, Response::Kind::kExecute);
  EXPECT_EQ(out[1].op, OpType::kJoin);
  EXPECT_EQ(out[1].join_last_rank, 1);
}

}  // namespace
}  // namespace khorovod
