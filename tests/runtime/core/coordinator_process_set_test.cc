// Coordinator with process sets: registration and removal, readiness over
// the members, responses in the set's terms, and the errors (unregistered
// set, mismatched registration, one name in two sets waiting on each other).
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

Request AddSet(int rank, std::vector<int64_t> members) {
  Request q = MakeRequest(rank, OpType::kProcessSet, "khorovod.process_set", {0});
  q.splits = std::move(members);
  q.root = -1;
  return q;
}

Request RemoveSet(int rank, int id) {
  Request q = MakeRequest(rank, OpType::kProcessSet, "khorovod.process_set", {0});
  q.root = id;
  return q;
}

Request InSet(Request q, int set) {
  q.process_set = set;
  return q;
}

// Registers `members` on a coordinator of `size` ranks; returns the id.
int Register(Coordinator& c, int size, const std::vector<int64_t>& members) {
  for (int r = 0; r < size; ++r) c.Add(AddSet(r, members), kT0);
  std::vector<Response> out = c.Collect();
  EXPECT_EQ(out.size(), 1u);
  if (out.size() != 1) return -1;
  EXPECT_EQ(out[0].kind, Response::Kind::kExecute) << out[0].error_message;
  EXPECT_EQ(out[0].op, OpType::kProcessSet);
  EXPECT_EQ(out[0].members, members);
  return out[0].process_set;
}

TEST(CoordinatorProcessSets, RegistrationAssignsFreshIds) {
  Coordinator c(3);
  EXPECT_EQ(Register(c, 3, {0, 2}), 1);
  EXPECT_EQ(Register(c, 3, {1}), 2);
}

TEST(CoordinatorProcessSets, ReadyOnceEveryMemberSubmitted) {
  Coordinator c(3);
  const int set = Register(c, 3, {0, 2});
  c.Add(InSet(Allreduce(0, "g"), set), kT0);
  EXPECT_TRUE(c.Collect().empty());
  c.Add(InSet(Allreduce(2, "g"), set), kT0);
  std::vector<Response> out = c.Collect();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kExecute);
  EXPECT_EQ(out[0].process_set, set);
}

TEST(CoordinatorProcessSets, ResponsesUseTheSetsNumbering) {
  Coordinator c(4);
  const int set = Register(c, 4, {1, 3});
  // allgather sizes in member order; broadcast root as the member index.
  c.Add(InSet(MakeRequest(3, OpType::kAllgather, "ag", {5, 2}), set), kT0);
  c.Add(InSet(MakeRequest(1, OpType::kAllgather, "ag", {4, 2}), set), kT0);
  Request b1 = InSet(MakeRequest(1, OpType::kBroadcast, "bc"), set), b3 = b1;
  b1.root = b3.root = 3;
  b3.rank = 3;
  c.Add(b1, kT0);
  c.Add(b3, kT0);
  // alltoall without splits: equal split over the set's 2 members.
  c.Add(InSet(MakeRequest(1, OpType::kAlltoall, "a2a", {6}), set), kT0);
  c.Add(InSet(MakeRequest(3, OpType::kAlltoall, "a2a", {6}), set), kT0);
  std::vector<Response> out = c.Collect();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].sizes, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(out[1].root, 1);
  EXPECT_EQ(out[2].sizes, (std::vector<int64_t>{3, 3, 3, 3}));
}

TEST(CoordinatorProcessSets, SameNameInDisjointSetsRunsApart) {
  Coordinator c(4);
  const int low = Register(c, 4, {0, 1}), high = Register(c, 4, {2, 3});
  for (int r : {0, 1}) c.Add(InSet(Allreduce(r, "grad"), low), kT0);
  for (int r : {2, 3}) c.Add(InSet(Allreduce(r, "grad"), high), kT0);
  std::vector<Response> out = c.Collect();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].process_set, low);
  EXPECT_EQ(out[1].process_set, high);
}

TEST(CoordinatorProcessSets, NameInTwoSetsWaitingOnEachOtherIsAMismatch) {
  Coordinator c(3);
  const int pair = Register(c, 3, {0, 1});
  c.Add(InSet(Allreduce(0, "x"), pair), kT0);  // waits for rank 1
  c.Add(Allreduce(1, "x"), kT0);               // global: waits for rank 0
  c.Add(Allreduce(2, "x"), kT0);
  std::vector<Response> out = c.Collect();
  ASSERT_EQ(out.size(), 2u);
  for (const Response& r : out) {
    EXPECT_EQ(r.kind, Response::Kind::kError);
    EXPECT_EQ(r.error_code, StatusCode::kMismatch);
    EXPECT_TRUE(HasSubstr(r.error_message, "submitted in different process sets"));
  }
  EXPECT_NE(out[0].process_set, out[1].process_set);
  EXPECT_TRUE(c.empty());
}

TEST(CoordinatorProcessSets, NameReusedAfterTheFirstSetCompletesIsFine) {
  Coordinator c(3);
  const int pair = Register(c, 3, {1, 2});
  // Rank 2 still has 'y' in the pair; rank 0 waits for rank 2 globally, but
  // the pair does not wait for rank 0, so it can complete first.
  c.Add(Allreduce(0, "y"), kT0);
  c.Add(InSet(Allreduce(2, "y"), pair), kT0);
  EXPECT_TRUE(c.Collect().empty());
  c.Add(InSet(Allreduce(1, "y"), pair), kT0);
  std::vector<Response> out = c.Collect();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kExecute);
}

TEST(CoordinatorProcessSets, RegistrationErrors) {
  Coordinator c(3);
  c.Add(AddSet(0, {0, 1}), kT0);
  c.Add(AddSet(1, {0, 2}), kT0);
  c.Add(AddSet(2, {0, 1}), kT0);
  std::vector<Response> out = c.Collect();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].error_code, StatusCode::kMismatch);
  EXPECT_TRUE(HasSubstr(out[0].error_message, "process set ranks"));

  for (int r = 0; r < 3; ++r) c.Add(AddSet(r, {2, 1}), kT0);
  out = c.Collect();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].error_code, StatusCode::kInvalidArgument);
  EXPECT_TRUE(HasSubstr(out[0].error_message, "distinct, ascending"));

  for (int r = 0; r < 3; ++r) c.Add(AddSet(r, {0, 1, 2}), kT0);
  out = c.Collect();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(HasSubstr(out[0].error_message, "already registered (id 0)"));
}

TEST(CoordinatorProcessSets, RemovalFailsPendingOperationsAndLaterUse) {
  Coordinator c(3);
  const int set = Register(c, 3, {0, 1});
  c.Add(InSet(Allreduce(0, "pending"), set), kT0);
  for (int r = 0; r < 3; ++r) c.Add(RemoveSet(r, set), kT0);
  std::vector<Response> out = c.Collect();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].op, OpType::kProcessSet);
  EXPECT_EQ(out[0].kind, Response::Kind::kExecute);
  EXPECT_TRUE(out[0].members.empty());
  EXPECT_EQ(out[1].error_code, StatusCode::kFailedPrecondition);
  EXPECT_EQ(out[1].names, std::vector<std::string>{"pending"});

  c.Add(InSet(Allreduce(1, "late"), set), kT0);
  out = c.Collect();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].error_code, StatusCode::kFailedPrecondition);
  EXPECT_TRUE(HasSubstr(out[0].error_message, "not registered"));

  for (int r = 0; r < 3; ++r) c.Add(RemoveSet(r, set), kT0);
  out = c.Collect();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].error_code, StatusCode::kInvalidArgument);
}

TEST(CoordinatorProcessSets, PendingNamesOnlyTheMissingMembers) {
  Coordinator c(4);
  const int set = Register(c, 4, {1, 2});
  c.Add(InSet(Allreduce(1, "slow"), set), kT0);
  EXPECT_TRUE(c.Collect().empty());
  std::vector<PendingTensor> pending = c.Pending();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].missing_ranks, std::vector<int>{2});
}

}  // namespace
}  // namespace khorovod
