// Process sets through the C++ API at 2, 3 and 4 real processes: a set's
// collectives involve only its members, with the set's ranks and size;
// non-members are refused at once; sets come and go collectively; misuse
// fails on every rank involved instead of hanging.
#include <gtest/gtest.h>

#include <numeric>

#include "multiproc.h"
#include "tensor_data.h"

namespace khorovod::testing {
namespace {

class ProcessSetTest : public ::testing::TestWithParam<int> {};

// All but the last rank (at 2 ranks: rank 0 alone).
std::vector<int> AllButLast(int size) {
  std::vector<int> ranks(static_cast<size_t>(size - 1));
  std::iota(ranks.begin(), ranks.end(), 0);
  return ranks;
}

int IndexOf(const std::vector<int>& v, int x) {
  auto it = std::find(v.begin(), v.end(), x);
  return it == v.end() ? -1 : static_cast<int>(it - v.begin());
}

TEST_P(ProcessSetTest, CollectivesRunAmongTheMembersOnly) {
  KH_RUN_RANKS(GetParam(), [](Runtime& rt, const RankContext& ctx) {
    const std::vector<int> members = AllButLast(ctx.size);
    StatusOr<int> set = rt.add_process_set(members);
    ASSERT_TRUE(set.ok()) << set.status();
    EXPECT_EQ(rt.process_set_ranks(*set), members);
    EXPECT_EQ(rt.process_set_size(*set), static_cast<int>(members.size()));
    const int me = IndexOf(members, ctx.rank);
    EXPECT_EQ(rt.process_set_rank(*set), me);
    const int k = static_cast<int>(members.size());
    Tensor x(DataType::kInt64, {3});
    for (int i = 0; i < 3; ++i) x.data_as<int64_t>()[i] = ctx.rank + 1;
    if (me < 0) {
      Status s = rt.allreduce("in.set", x.view(), x.view(), {ReduceOp::kSum, 1.0, 1.0, *set});
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
      EXPECT_NE(s.message().find("not a member of process set"), std::string::npos) << s;
    } else {
      const int64_t total = static_cast<int64_t>(k) * (k + 1) / 2;  // members are 0..k-1
      ASSERT_TRUE(
          rt.allreduce("in.set", x.view(), x.view(), {ReduceOp::kSum, 1.0, 1.0, *set}).ok());
      EXPECT_EQ(x.data_as<int64_t>()[2], total);
      Tensor avg(DataType::kFloat64, {1});
      avg.data_as<double>()[0] = ctx.rank;
      ASSERT_TRUE(
          rt.allreduce("avg", avg.view(), avg.view(), {ReduceOp::kAverage, 1.0, 1.0, *set}).ok());
      EXPECT_DOUBLE_EQ(avg.data_as<double>()[0], (k - 1) / 2.0);
      Tensor rows(DataType::kInt32, {ctx.rank + 1});
      for (int i = 0; i <= ctx.rank; ++i) rows.data_as<int32_t>()[i] = ctx.rank;
      Tensor gathered;
      AllgatherOptions ag;
      ag.process_set = *set;
      ASSERT_TRUE(rt.allgather("gather", rows.view(), &gathered, ag).ok());
      ASSERT_EQ(gathered.shape, Shape{total});
      Tensor b(DataType::kInt32, {2});
      b.data_as<int32_t>()[0] = ctx.rank;
      ASSERT_TRUE(rt.broadcast("bcast", b.view(), {members.back(), *set}).ok());
      EXPECT_EQ(b.data_as<int32_t>()[0], members.back());
      Tensor send(DataType::kInt32, {k});
      for (int i = 0; i < k; ++i) send.data_as<int32_t>()[i] = ctx.rank;
      Tensor received;
      std::vector<int64_t> splits;
      ASSERT_TRUE(rt.alltoall("a2a", send.view(), &received, &splits, {{}, *set}).ok());
      ASSERT_EQ(received.shape, Shape{k});
      for (int i = 0; i < k; ++i) EXPECT_EQ(received.data_as<int32_t>()[i], members[i]);
      Tensor rs_in(DataType::kInt32, {k}), rs_out;
      for (int i = 0; i < k; ++i) rs_in.data_as<int32_t>()[i] = 1;
      ASSERT_TRUE(
          rt.reducescatter("rs", rs_in.view(), &rs_out, {ReduceOp::kSum, 1.0, 1.0, *set}).ok());
      ASSERT_EQ(rs_out.shape, Shape{1});
      EXPECT_EQ(rs_out.data_as<int32_t>()[0], k);
      ASSERT_TRUE(rt.barrier(*set).ok());
    }
    // The global set is unaffected and still sees every rank.
    Tensor all(DataType::kInt32, {1});
    all.data_as<int32_t>()[0] = 1;
    ASSERT_TRUE(rt.allreduce("global.after", all.view(), all.view(), {ReduceOp::kSum}).ok());
    EXPECT_EQ(all.data_as<int32_t>()[0], ctx.size);
    ASSERT_TRUE(rt.remove_process_set(*set).ok());
    EXPECT_TRUE(rt.process_set_ranks(*set).empty());
    Status gone = rt.allreduce("removed", x.view(), x.view(), {ReduceOp::kSum, 1.0, 1.0, *set});
    EXPECT_EQ(gone.code(), StatusCode::kInvalidArgument) << gone;
  });
}

// Two disjoint sets run the same tensor names at the same time.
TEST_P(ProcessSetTest, DisjointSetsUseTheSameNames) {
  if (GetParam() < 4) GTEST_SKIP() << "needs two sets of two ranks";
  KH_RUN_RANKS(GetParam(), [](Runtime& rt, const RankContext& ctx) {
    StatusOr<int> low = rt.add_process_set({0, 1});
    StatusOr<int> high = rt.add_process_set({2, 3});
    ASSERT_TRUE(low.ok() && high.ok());
    const int mine = ctx.rank < 2 ? *low : *high;
    for (int step = 0; step < 20; ++step) {
      Tensor g(DataType::kFloat32, {64});
      for (int i = 0; i < 64; ++i) g.data_as<float>()[i] = static_cast<float>(ctx.rank);
      Status s = rt.allreduce("grad", g.view(), g.view(), {ReduceOp::kSum, 1.0, 1.0, mine});
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_EQ(g.data_as<float>()[7], ctx.rank < 2 ? 1.0f : 5.0f);
    }
    // shutdown() is collective and aborts what other ranks still have in
    // flight: the sets finish at different times, so meet first.
    ASSERT_TRUE(rt.barrier().ok());
  });
}

TEST_P(ProcessSetTest, MisuseFailsOnEveryRankInsteadOfHanging) {
  KH_RUN_RANKS(GetParam(), [](Runtime& rt, const RankContext& ctx) {
    // Different member lists: refused on every rank.
    StatusOr<int> bad = rt.add_process_set({ctx.rank});
    EXPECT_EQ(bad.status().code(), StatusCode::kMismatch) << bad.status();
    // At 2 ranks a non-global set has one member, which never waits.
    if (ctx.size < 3) return;
    StatusOr<int> pair = rt.add_process_set({0, 1});
    ASSERT_TRUE(pair.ok()) << pair.status();
    // Rank 0 uses the pair, the others the global set, for the same name.
    Tensor t(DataType::kFloat32, {2});
    Status s = rt.allreduce("clash", t.view(), t.view(),
                            {ReduceOp::kSum, 1.0, 1.0, ctx.rank == 0 ? *pair : 0});
    EXPECT_EQ(s.code(), StatusCode::kMismatch) << s;
    EXPECT_NE(s.message().find("different process sets"), std::string::npos) << s;
    if (ctx.rank < 2) {
      Tensor shaped(DataType::kFloat32, {ctx.rank + 2});
      Status m =
          rt.allreduce("shape", shaped.view(), shaped.view(), {ReduceOp::kSum, 1.0, 1.0, *pair});
      EXPECT_EQ(m.code(), StatusCode::kMismatch) << m;
    }
    Tensor ok(DataType::kInt32, {1});
    ok.data_as<int32_t>()[0] = 1;
    ASSERT_TRUE(rt.allreduce("works", ok.view(), ok.view(), {ReduceOp::kSum}).ok());
    EXPECT_EQ(ok.data_as<int32_t>()[0], ctx.size);
  });
}

INSTANTIATE_TEST_SUITE_P(Sizes, ProcessSetTest, ::testing::Values(2, 3, 4));

}  // namespace
}  // namespace khorovod::testing
