// PlanFusion: which allreduce responses share one fused buffer.
#include "core/fusion.h"

#include <gtest/gtest.h>

#include <cstring>
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
  const std::vector<Response> in = {AR(4), max, half, pre, post, gpu, Other(OpType::kBroadcast),
                                    AR(4), max};
  EXPECT_EQ(PlanFusion(in, 1 << 20), (Plan{{0, 7}, {1, 8}, {2}, {3}, {4}, {5}, {6}}));
}

TEST(Fusion, OtherOperationsNeverFuse) {
  const std::vector<Response> in = {
      Other(OpType::kBroadcast),     Other(OpType::kBroadcast), Other(OpType::kAllgather),
      Other(OpType::kAllgather),     Other(OpType::kAlltoall),  Other(OpType::kReducescatter),
      Other(OpType::kReducescatter), Other(OpType::kBarrier),   Other(OpType::kBarrier)};
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
  EXPECT_EQ(PlanFusion({AR(8, DataType::kFloat64), AR(8, DataType::kFloat64)}, 127),
            (Plan{{0}, {1}}));
  EXPECT_EQ(PlanFusion({AR(8, DataType::kFloat64), AR(8, DataType::kFloat64)}, 128),
            (Plan{{0, 1}}));
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
      bytes +=
          static_cast<size_t>(in[plan[g][k]].total_elements()) * DataTypeSize(in[plan[g][k]].dtype);
    }
    if (plan[g].size() > 1) {
      EXPECT_LE(bytes, 48u) << "group " << g;
    }
  }
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(seen[i], 1) << "index " << i;
}

using Place = FusionLayout::Place;

TEST(FusionLayout, SmallMembersArePackedInOrderLargeOnesStayInTheirOutput) {
  const size_t big = kPackBelowBytes;
  const FusionLayout layout = LayoutFusedAllreduce({8, big, 16, 0}, {true, true, true, true});
  ASSERT_EQ(layout.members.size(), 4u);
  EXPECT_EQ(layout.members[0].place, Place::kPacked);
  EXPECT_EQ(layout.members[0].offset, 0u);
  EXPECT_EQ(layout.members[1].place, Place::kInOutput);
  EXPECT_EQ(layout.members[2].place, Place::kPacked);
  EXPECT_EQ(layout.members[2].offset, 8u);
  EXPECT_EQ(layout.members[3].place, Place::kPacked);
  EXPECT_EQ(layout.packed_bytes, 24u);
  EXPECT_EQ(layout.buffer_bytes, 24u);
}

TEST(FusionLayout, ALoneMemberIsNeverPackedWhateverItsSize) {
  EXPECT_EQ(LayoutFusedAllreduce({4}, {true}).members[0].place, Place::kInOutput);
  const FusionLayout joined = LayoutFusedAllreduce({4}, {false});
  EXPECT_EQ(joined.members[0].place, Place::kZeroSlot);
  EXPECT_EQ(joined.buffer_bytes, 4u);
}

TEST(FusionLayout, AJoinedRankReducesZeroSlotsAfterThePackedBlockWithTheSameSpans) {
  const size_t big = kPackBelowBytes + 4;
  const std::vector<size_t> bytes = {big, 8, big};
  const FusionLayout have = LayoutFusedAllreduce(bytes, {true, true, true});
  const FusionLayout joined = LayoutFusedAllreduce(bytes, {false, false, true});
  EXPECT_EQ(joined.members[0].place, Place::kZeroSlot);
  EXPECT_EQ(joined.members[0].offset, 8u) << "after the packed block";
  EXPECT_EQ(joined.buffer_bytes, 8 + big);
  std::vector<std::byte> buffer(joined.buffer_bytes);
  std::vector<std::byte> out0(big), out2(big);
  const std::vector<void*> outputs = {out0.data(), nullptr, out2.data()};
  const auto a = have.Spans(buffer.data(), outputs, 4);
  const auto b = joined.Spans(buffer.data(), {nullptr, nullptr, out2.data()}, 4);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].count, b[i].count) << "span " << i;
  EXPECT_EQ(a[0].data, out0.data());
  EXPECT_EQ(b[0].data, buffer.data() + 8);
  EXPECT_EQ(a[2].data, buffer.data()) << "the packed block comes last";
}

TEST(FusionLayout, PackAndUnpackRoundTripThroughTheBuffer) {
  const size_t big = kPackBelowBytes;
  std::vector<std::byte> in0(4, std::byte{1}), in1(big, std::byte{2}), in2(8, std::byte{3});
  std::vector<std::byte> out0(4), out1(big), out2(8);
  const FusionLayout layout = LayoutFusedAllreduce({4, big, 8}, {true, true, false});
  std::vector<std::byte> buffer(layout.buffer_bytes, std::byte{9});
  auto copy = [](void* dst, const void* src, size_t n) {
    std::memcpy(dst, src, n);
    return Status::Ok();
  };
  auto zero = [](void* dst, size_t n) {
    std::memset(dst, 0, n);
    return Status::Ok();
  };
  ASSERT_TRUE(PackFusion(layout, buffer.data(), {in0.data(), in1.data(), nullptr},
                         {out0.data(), out1.data(), nullptr}, copy, zero)
                  .ok());
  EXPECT_EQ(buffer[0], std::byte{1});
  EXPECT_EQ(buffer[4], std::byte{0}) << "a missing packed member is zeros";
  EXPECT_EQ(out1[big - 1], std::byte{2}) << "a large member is copied into its output";
  buffer[0] = std::byte{7};
  ASSERT_TRUE(UnpackFusion(layout, buffer.data(), {out0.data(), out1.data(), nullptr}, copy).ok());
  EXPECT_EQ(out0[0], std::byte{7});
}

}  // namespace
}  // namespace khorovod
