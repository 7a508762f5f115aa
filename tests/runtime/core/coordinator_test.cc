// Coordinator: readiness, ordering, agreement checks, response sizes and
// grouped release. Stall and join behaviour: coordinator_join_stall_test.cc.
#include "core/coordinator.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/enforce.h"
#include "coord_common.h"
#include "test_util.h"

namespace khorovod {
namespace {

using namespace std::chrono_literals;
using testing::Allreduce;
using testing::HasSubstr;
using testing::kT0;
using testing::MakeRequest;
using testing::Names;

TEST(Coordinator, ReadyOnlyWhenEveryRankSubmitted) {
  Coordinator c(3);
  EXPECT_TRUE(c.empty());
  c.Add(Allreduce(0, "a"), kT0);
  c.Add(Allreduce(2, "a"), kT0);
  EXPECT_TRUE(c.Collect().empty());
  EXPECT_FALSE(c.empty());
  c.Add(Allreduce(0, "a"), kT0);  // a resubmission does not count twice
  EXPECT_TRUE(c.Collect().empty());
  c.Add(Allreduce(1, "a"), kT0);
  std::vector<Response> out = c.Collect();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kExecute);
  EXPECT_EQ(out[0].op, OpType::kAllreduce);
  EXPECT_EQ(out[0].names, std::vector<std::string>{"a"});
  EXPECT_TRUE(c.empty());
  EXPECT_TRUE(c.Collect().empty());  // released exactly once
}

TEST(Coordinator, SingleRankIsReadyImmediately) {
  Coordinator c(1);
  c.Add(Allreduce(0, "a"), kT0);
  EXPECT_EQ(Names(c.Collect()), std::vector<std::string>{"a"});
}

TEST(Coordinator, ResponsesComeInFirstSeenOrder) {
  Coordinator c(2);
  for (const char* n : {"x", "y", "z"}) c.Add(Allreduce(0, n), kT0);
  for (const char* n : {"z", "y", "x"}) c.Add(Allreduce(1, n), kT0);
  EXPECT_EQ(Names(c.Collect()), (std::vector<std::string>{"x", "y", "z"}));

  // Partially ready tables release only the ready names, keeping order.
  for (const char* n : {"p", "q", "r"}) c.Add(Allreduce(0, n), kT0);
  c.Add(Allreduce(1, "r"), kT0);
  c.Add(Allreduce(1, "p"), kT0);
  EXPECT_EQ(Names(c.Collect()), (std::vector<std::string>{"p", "r"}));
  c.Add(Allreduce(1, "q"), kT0);
  EXPECT_EQ(Names(c.Collect()), std::vector<std::string>{"q"});
}

TEST(Coordinator, RequestFromAnOutOfRangeRankIsAnInvariantViolation) {
  Coordinator c(2);
  EXPECT_THROW(c.Add(Allreduce(2, "a"), kT0), InvariantViolation);
  EXPECT_THROW(c.Add(Allreduce(-1, "a"), kT0), InvariantViolation);
}

TEST(Coordinator, AllreduceResponseCarriesTheParameters) {
  Coordinator c(2);
  for (int r = 0; r < 2; ++r) {
    Request q = Allreduce(r, "a", {3, 5});
    q.dtype = DataType::kBFloat16;
    q.reduce_op = ReduceOp::kProduct;
    q.prescale = 0.25;
    q.postscale = 8;
    q.device = Device{DeviceKind::kCUDA, r};  // only the kind must agree
    c.Add(q, kT0);
  }
  std::vector<Response> out = c.Collect();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dtype, DataType::kBFloat16);
  EXPECT_EQ(out[0].reduce_op, ReduceOp::kProduct);
  EXPECT_EQ(out[0].prescale, 0.25);
  EXPECT_EQ(out[0].postscale, 8);
  EXPECT_EQ(out[0].device.kind, DeviceKind::kCUDA);
  EXPECT_EQ(out[0].sizes, std::vector<int64_t>{15});
  EXPECT_EQ(out[0].total_elements(), 15);
}

// Submits `name` from every rank of a 3-rank coordinator, letting `mutate`
// change rank 1's request, and returns the single response.
Response CollectWithRank1Changed(OpType op, const std::function<void(Request&)>& mutate,
                                 Shape shape = {2, 3}) {
  Coordinator c(3);
  for (int r = 0; r < 3; ++r) {
    Request q = MakeRequest(r, op, "t", shape);
    if (r == 1) mutate(q);
    c.Add(q, kT0);
  }
  std::vector<Response> out = c.Collect();
  EXPECT_TRUE(c.empty()) << "a mismatched tensor must be released";
  if (out.size() != 1) {
    ADD_FAILURE() << "expected one response, got " << out.size();
    return Response{};
  }
  return out[0];
}

void ExpectMismatch(const Response& r, const std::vector<std::string>& fragments) {
  EXPECT_EQ(r.kind, Response::Kind::kError);
  EXPECT_EQ(r.error_code, StatusCode::kMismatch);
  EXPECT_EQ(r.names, std::vector<std::string>{"t"});
  EXPECT_TRUE(HasSubstr(r.error_message, "tensor 't'"));
  for (const std::string& f : fragments) EXPECT_TRUE(HasSubstr(r.error_message, f));
}

TEST(Coordinator, ShapeMismatchNamesEveryRanksShape) {
  Response r = CollectWithRank1Changed(OpType::kAllreduce, [](Request& q) { q.shape = {3, 2}; });
  ExpectMismatch(r, {"shape", "rank 0 has [2, 3]", "rank 1 has [3, 2]", "rank 2 has [2, 3]"});
  EXPECT_EQ(r.op, OpType::kAllreduce);
}

TEST(Coordinator, DtypeMismatch) {
  ExpectMismatch(
      CollectWithRank1Changed(OpType::kAllreduce, [](Request& q) { q.dtype = DataType::kInt32; }),
      {"dtype", "rank 0 has float32", "rank 1 has int32", "rank 2 has float32"});
}

TEST(Coordinator, ReduceOpMismatch) {
  ExpectMismatch(
      CollectWithRank1Changed(OpType::kAllreduce, [](Request& q) { q.reduce_op = ReduceOp::kMax; }),
      {"reduce op", "rank 0 has sum", "rank 1 has max"});
  ExpectMismatch(CollectWithRank1Changed(OpType::kReducescatter,
                                         [](Request& q) { q.reduce_op = ReduceOp::kMin; }),
                 {"reduce op", "rank 1 has min", "rank 2 has sum"});
}

TEST(Coordinator, ScaleFactorMismatch) {
  ExpectMismatch(CollectWithRank1Changed(OpType::kAllreduce, [](Request& q) { q.prescale = 0.5; }),
                 {"prescale", "rank 0 has 1", "rank 1 has 0.5"});
  ExpectMismatch(
      CollectWithRank1Changed(OpType::kReducescatter, [](Request& q) { q.postscale = 2; }),
      {"postscale", "rank 1 has 2", "rank 2 has 1"});
}

TEST(Coordinator, RootMismatchForBroadcast) {
  ExpectMismatch(CollectWithRank1Changed(OpType::kBroadcast, [](Request& q) { q.root = 2; }),
                 {"root", "rank 0 has 0", "rank 1 has 2", "rank 2 has 0"});
  ExpectMismatch(CollectWithRank1Changed(OpType::kBroadcast, [](Request& q) { q.shape = {6}; }),
                 {"shape", "rank 1 has [6]"});
}

TEST(Coordinator, OperationKindMismatch) {
  Response r =
      CollectWithRank1Changed(OpType::kAllreduce, [](Request& q) { q.op = OpType::kBroadcast; });
  ExpectMismatch(
      r, {"operation", "rank 0 has allreduce", "rank 1 has broadcast", "rank 2 has allreduce"});
}

TEST(Coordinator, DeviceKindMismatch) {
  ExpectMismatch(CollectWithRank1Changed(OpType::kAllreduce,
                                         [](Request& q) { q.device.kind = DeviceKind::kCUDA; }),
                 {"device", "rank 0 has cpu", "rank 1 has cuda"});
}

TEST(Coordinator, GroupMismatch) {
  ExpectMismatch(CollectWithRank1Changed(OpType::kAllreduce, [](Request& q) { q.group = "g2"; }),
                 {"group", "rank 1 has 'g2'", "rank 0 has ''"});
}

TEST(Coordinator, AllgatherTrailingDimensionsMustAgree) {
  ExpectMismatch(CollectWithRank1Changed(OpType::kAllgather,
                                         [](Request& q) {
                                           q.shape = {5, 4};
                                         }),
                 {"shape beyond the first dimension", "rank 0 has [3]", "rank 1 has [4]"});
  ExpectMismatch(CollectWithRank1Changed(OpType::kAllgather,
                                         [](Request& q) {
                                           q.shape = {2, 3, 1};
                                         }),
                 {"number of dimensions", "rank 0 has 2", "rank 1 has 3"});
  ExpectMismatch(CollectWithRank1Changed(OpType::kAlltoall,
                                         [](Request& q) {
                                           q.shape = {2, 9};
                                         }),
                 {"shape beyond the first dimension", "rank 1 has [9]"});
}

TEST(Coordinator, ScalarsAreRejectedWhereAFirstDimensionIsNeeded) {
  for (OpType op : {OpType::kAllgather, OpType::kAlltoall, OpType::kReducescatter}) {
    Response r = CollectWithRank1Changed(
        op, [](Request&) {}, Shape{});
    ExpectMismatch(r, {"at least one dimension"});
    EXPECT_EQ(r.op, op);
  }
}

TEST(Coordinator, AllgatherSizesAreEachRanksFirstDimension) {
  Coordinator c(3);
  const Shape shapes[] = {{2, 3, 4}, {5, 3, 4}, {0, 3, 4}};
  for (int r = 2; r >= 0; --r) c.Add(MakeRequest(r, OpType::kAllgather, "g", shapes[r]), kT0);
  std::vector<Response> out = c.Collect();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kExecute);
  EXPECT_EQ(out[0].sizes, (std::vector<int64_t>{2, 5, 0}));
  EXPECT_EQ(out[0].row_elements, 12);
}

TEST(Coordinator, AlltoallSizesMatrixFromExplicitAndEqualSplits) {
  Coordinator c(2);
  Request r0 = MakeRequest(0, OpType::kAlltoall, "x", {3, 2});
  r0.splits = {1, 2};
  Request r1 = MakeRequest(1, OpType::kAlltoall, "x", {4, 2});  // equal split: 2 and 2
  c.Add(r1, kT0);
  c.Add(r0, kT0);
  std::vector<Response> out = c.Collect();
  ASSERT_EQ(out.size(), 1u);
  // [sender * size + receiver]
  EXPECT_EQ(out[0].sizes, (std::vector<int64_t>{1, 2, 2, 2}));
  EXPECT_EQ(out[0].row_elements, 2);

  Coordinator e(3);
  for (int r = 0; r < 3; ++r) e.Add(MakeRequest(r, OpType::kAlltoall, "y", {3 * (r + 1), 5}), kT0);
  out = e.Collect();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].sizes, (std::vector<int64_t>{1, 1, 1, 2, 2, 2, 3, 3, 3}));
  EXPECT_EQ(out[0].row_elements, 5);
}

TEST(Coordinator, ReducescatterAndBroadcastSizes) {
  Coordinator c(2);
  for (int r = 0; r < 2; ++r) {
    Request q = MakeRequest(r, OpType::kReducescatter, "rs", {7, 2, 3}, DataType::kInt64);
    q.reduce_op = ReduceOp::kMax;
    c.Add(q, kT0);
    Request b = MakeRequest(r, OpType::kBroadcast, "bc", {2, 5});
    b.root = 1;
    c.Add(b, kT0);
  }
  std::vector<Response> out = c.Collect();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].op, OpType::kReducescatter);
  EXPECT_EQ(out[0].sizes, std::vector<int64_t>{7});
  EXPECT_EQ(out[0].row_elements, 6);
  EXPECT_EQ(out[0].dtype, DataType::kInt64);
  EXPECT_EQ(out[0].reduce_op, ReduceOp::kMax);
  EXPECT_EQ(out[1].op, OpType::kBroadcast);
  EXPECT_EQ(out[1].sizes, std::vector<int64_t>{10});
  EXPECT_EQ(out[1].root, 1);
}

Request Grouped(int rank, const std::string& name, int group_size) {
  Request q = Allreduce(rank, name);
  q.group = "g";
  q.group_size = group_size;
  return q;
}

TEST(Coordinator, GroupIsReleasedTogetherOnlyWhenEveryMemberIsReady) {
  Coordinator c(2);
  for (const char* n : {"g1", "g2", "g3"}) c.Add(Grouped(0, n, 3), kT0);
  c.Add(Allreduce(0, "solo"), kT0);
  c.Add(Grouped(1, "g1", 3), kT0);
  c.Add(Allreduce(1, "solo"), kT0);
  EXPECT_EQ(Names(c.Collect()), std::vector<std::string>{"solo"});  // not held up by the group
  c.Add(Grouped(1, "g3", 3), kT0);
  EXPECT_TRUE(c.Collect().empty()) << "g1 and g3 are ready but g2 is not";
  c.Add(Grouped(1, "g2", 3), kT0);
  std::vector<Response> out = c.Collect();
  EXPECT_EQ(Names(out), (std::vector<std::string>{"g1", "g2", "g3"}));
  for (const Response& r : out) {
    EXPECT_EQ(r.kind, Response::Kind::kExecute);
    EXPECT_EQ(r.group, "g");
    EXPECT_EQ(r.group_size, 3);
  }
  EXPECT_TRUE(c.empty());
  EXPECT_TRUE(c.Collect().empty());
}

TEST(Coordinator, BarrierIsReadyWhenEveryRankArrived) {
  Coordinator c(2);
  c.Add(MakeRequest(0, OpType::kBarrier, "khorovod.barrier", {}), kT0);
  EXPECT_TRUE(c.Collect().empty());
  c.Add(MakeRequest(1, OpType::kBarrier, "khorovod.barrier", {}), kT0);
  std::vector<Response> out = c.Collect();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kExecute);
  EXPECT_EQ(out[0].op, OpType::kBarrier);
}

}  // namespace
}  // namespace khorovod
