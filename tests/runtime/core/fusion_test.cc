// PlanFusion: which allreduce responses share one fused buffer.
#include "core/fusion.h"

#include <gtest/gtest.h>

#include <vector>

namespace khorovod {
namespace {

using Plan = std::vector<std::vector<size_t>>;

// An allreduce of `elements` float32 values (4 bytes each).
Response AR(int64_t elements, DataType dtype = DataType::kFloat32) {
  Response r;
  r.op = OpType::kAllreduce;
  r.names = {"t"};
  r.dtype = dtype;
  r.sizes = {elements};
  return r;
}

Response Other(OpType op) {
  Response r = AR(1);
  r.op = op;
  return r;
}

TEST(Fusion, EmptyInputGivesAnEmptyPlan) { EXPECT_EQ(PlanFusion({}, 1024), Plan{}); }

TEST(Fusion, CompatibleAllreducesFuseInOrder) {
  EXPECT_EQ(PlanFusion({AR(10), AR(20), AR(30)}, 1 << 20), (Plan{{0, 1, 2}}));
}

TEST(Fusion, UpToTheThresholdInclusive) {
  // 40 + 40 + 20 bytes = 100 fits exactly; the fourth starts a new group.
  EXPECT_EQ(PlanFusion({AR(10), AR(10), AR(5), AR(1)}, 100), (Plan{{0, 1, 2}, {3}}));
  EXPECT_EQ(PlanFusion({AR(10), AR(10), AR(6), AR(1)}, 100), (Plan{{0, 1, 3}, {2}}))
      << "look-ahead past a tensor that does not fit";
}

TEST(Fusion, LooksAheadPastIncompatibleResponses) {
  Response max = AR(4);
  max.reduce_op = ReduceOp::kMax;
  Response half = AR(4, DataType::kFloat16);
  Response pre = AR(4);
  pre.prescale = 0.5;
  Response post = AR(4);
  post.postscale = 2;
  Response gpu = AR(4);
  gpu.device = Device{DeviceKind::kCUDA, 0};
  const std::vector<Response> in = {AR(4), max, half, pre, post, gpu, Other(OpType::kBroadcast), AR(4),
                                    max};
  EXPECT_EQ(PlanFusion(in, 1 << 20), (Plan{{0, 7}, {1, 8}, {2}, {3}, {4}, {5}, {6}}));
}

TEST(Fusion, OtherOperationsNeverFuse) {
  const std::vector<Response> in = {Other(OpType::kBroadcast), Other(OpType::kBroadcast),
                                    Other(OpType::kAllgather), Other(OpType::kAllgather),
                                    Other(OpType::kAlltoall),  Other(OpType::kReducescatter),
                                    Other(OpType::kReducescatter), Other(OpType::kBarrier),
                                    Other(OpType::kBarrier)};
  EXPECT_EQ(PlanFusion(in, 1 << 20), (Plan{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}}));
  // An allreduce head does not pull in other operations either.
  EXPECT_EQ(PlanFusion({AR(1), Other(OpType::kBroadcast), AR(1)}, 1 << 20), (Plan{{0, 2}, {1}}));
}

TEST(Fusion, ThresholdZeroRunsEachAllreduceAlone) {
  EXPECT_EQ(PlanFusion({AR(1), AR(1), AR(0), AR(2)}, 0), (Plan{{0}, {1}, {2}, {3}}));
}

TEST(Fusion, ATensorLargerThanTheThresholdRunsAlone) {
  EXPECT_EQ(PlanFusion({AR(100), AR(1), AR(1)}, 64), (Plan{{0}, {1, 2}}));
  EXPECT_EQ(PlanFusion({AR(1), AR(100), AR(1)}, 64), (Plan{{0, 2}, {1}}));
}

TEST(Fusion, SizeCountsEveryNameAndTheDtypeWidth) {
  Response multi = AR(0);
  multi.sizes = {8, 8};  // 64 bytes of float32
  EXPECT_EQ(PlanFusion({multi, AR(1)}, 64), (Plan{{0}, {1}}));
  EXPECT_EQ(PlanFusion({multi, AR(1)}, 68), (Plan{{0, 1}}));
  // float64 is twice as wide: 8 + 8 elements = 128 bytes.
  EXPECT_EQ(PlanFusion({AR(8, DataType::kFloat64), AR(8, DataType::kFloat64)}, 127), (Plan{{0}, {1}}));
  EXPECT_EQ(PlanFusion({AR(8, DataType::kFloat64), AR(8, DataType::kFloat64)}, 128), (Plan{{0, 1}}));
}

TEST(Fusion, ErrorResponseAtTheHeadIsNotAFusionHead) {
  Response err = AR(1);
  err.kind = Response::Kind::kError;
  const Plan plan = PlanFusion({err, AR(1), AR(1)}, 1 << 20);
  ASSERT_FALSE(plan.empty());
  EXPECT_EQ(plan.front(), std::vector<size_t>{0});
}

TEST(Fusion, EveryIndexAppearsExactlyOnceAndGroupsAreAscending) {
  std::vector<Response> in;
  for (int i = 0; i < 40; ++i) {
    Response r = AR(1 + (i * 7) % 13, i % 3 ? DataType::kFloat32 : DataType::kInt32);
    if (i % 5 == 0) r.op = OpType::kBroadcast;
    in.push_back(r);
  }
  const Plan plan = PlanFusion(in, 48);
  std::vector<int> seen(in.size(), 0);
  size_t previous_head = 0;
  for (size_t g = 0; g < plan.size(); ++g) {
    ASSERT_FALSE(plan[g].empty());
    if (g > 0) {
      EXPECT_GT(plan[g].front(), previous_head) << "groups ordered by their first member";
    }
    previous_head = plan[g].front();
    size_t bytes = 0;
    for (size_t k = 0; k < plan[g].size(); ++k) {
      ++seen[plan[g][k]];
      if (k > 0) {
        EXPECT_GT(plan[g][k], plan[g][k - 1]);
      }
      bytes += static_cast<size_t>(in[plan[g][k]].total_elements()) * DataTypeSize(in[plan[g][k]].dtype);
    }
    if (plan[g].size() > 1) {
      EXPECT_LE(bytes, 48u) << "group " << g;
    }
  }
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(seen[i], 1) << "index " << i;
}

}  // namespace
}  // namespace khorovod
