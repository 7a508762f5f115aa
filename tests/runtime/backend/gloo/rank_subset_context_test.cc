// ConnectRankSubset: every world rank (a thread here, over loopback) builds
// its host group's and its cross group's context through the world context;
// each subset context has the member's index as its rank and carries data
// among exactly its members.
#include "backend/gloo/rank_subset_context.h"

#include <gloo/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gtest/gtest.h>

#include <future>
#include <ostream>
#include <thread>
#include <vector>

#include "backend/gloo/gloo_ops.h"
#include "bootstrap/gloo_mesh.h"
#include "common/reduce_kernels.h"
#include "loopback_mesh.h"

namespace khorovod::gloo_ops {
namespace {

using std::chrono::milliseconds;

using khorovod::testing::LoopbackWorld;

// Sums `value` over a context's ranks.
int64_t Sum(const std::shared_ptr<gloo::Context>& ctx, int64_t value) {
  Status s = gloo_ops::Allreduce(ctx, &value, &value, 1, sizeof value,
                                 GetReduceFn(DataType::kInt64, ReduceOp::kSum));
  EXPECT_TRUE(s.ok()) << s;
  return value;
}

struct Layout {
  int hosts, per_host;
};

void PrintTo(const Layout& l, std::ostream* os) { *os << l.hosts << "x" << l.per_host; }

class RankSubset : public ::testing::TestWithParam<Layout> {};

// World rank r sits on host r % hosts (interleaved, so groups are not
// ranges of ranks), local rank r / hosts.
TEST_P(RankSubset, HostAndCrossGroupsConnectAndReduceAmongTheirMembers) {
  const Layout l = GetParam();
  const int size = l.hosts * l.per_host;
  gloo::rendezvous::HashStore store;
  std::vector<std::future<void>> ranks;
  for (int rank = 0; rank < size; ++rank) {
    ranks.push_back(std::async(std::launch::async, [&store, rank, size, l] {
      auto world = LoopbackWorld(store, rank, size);
      if (!world) return;
      std::vector<int> host, cross;
      for (int r = 0; r < size; ++r) {
        if (r % l.hosts == rank % l.hosts) host.push_back(r);
        if (r / l.hosts == rank / l.hosts) cross.push_back(r);
      }
      auto host_ctx = ConnectRankSubset(world, host, milliseconds(20'000));
      ASSERT_TRUE(host_ctx.ok()) << host_ctx.status();
      auto cross_ctx = ConnectRankSubset(world, cross, milliseconds(20'000));
      ASSERT_TRUE(cross_ctx.ok()) << cross_ctx.status();
      EXPECT_EQ((*host_ctx)->size, l.per_host);
      EXPECT_EQ((*host_ctx)->rank, rank / l.hosts);
      EXPECT_EQ((*cross_ctx)->size, l.hosts);
      EXPECT_EQ((*cross_ctx)->rank, rank % l.hosts);
      int64_t host_sum = 0, cross_sum = 0;
      for (int r : host) host_sum += r + 1;
      for (int r : cross) cross_sum += r + 1;
      EXPECT_EQ(Sum(*host_ctx, rank + 1), host_sum);
      EXPECT_EQ(Sum(*cross_ctx, rank + 1), cross_sum);
      // The world still works, in step with the subsets' use of it.
      EXPECT_EQ(Sum(world, rank + 1), int64_t{size} * (size + 1) / 2);
    }));
  }
  for (auto& r : ranks) r.get();
}

INSTANTIATE_TEST_SUITE_P(Layouts, RankSubset,
                         ::testing::Values(Layout{2, 2}, Layout{3, 2}, Layout{2, 3}, Layout{1, 3}),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return std::to_string(info.param.hosts) + "x" +
                                  std::to_string(info.param.per_host);
                         });

TEST(RankSubset, AGroupWithoutTheCallerIsRefusedWithoutStallingTheOthers) {
  gloo::rendezvous::HashStore store;
  auto other = std::async(std::launch::async, [&store] {
    auto world = LoopbackWorld(store, 1, 2);
    if (!world) return;
    auto alone = ConnectRankSubset(world, {1}, milliseconds(5'000));
    EXPECT_TRUE(alone.ok()) << alone.status();
    if (alone.ok()) {
      EXPECT_EQ((*alone)->size, 1);
    }
  });
  auto world = LoopbackWorld(store, 0, 2);
  ASSERT_TRUE(world);
  auto wrong = ConnectRankSubset(world, {1}, milliseconds(5'000));
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  other.get();
}

// A doomed generation's world is abandoned (bootstrap/gloo_mesh.h) while
// rank 0 waits in a subset collective on rank 1, which is alive but will
// never take part: the wait ends at once, not at the subset's timeout.
TEST(RankSubset, AbandoningTheWorldEndsAWaitOnTheSubset) {
  gloo::rendezvous::HashStore store;
  std::promise<void> rank0_done;
  auto other = std::async(std::launch::async, [&store, done = rank0_done.get_future()]() mutable {
    auto world = LoopbackWorld(store, 1, 2);
    if (!world) return;
    auto subset = ConnectRankSubset(world, {0, 1}, milliseconds(20'000));
    EXPECT_TRUE(subset.ok()) << subset.status();
    done.wait();  // alive, connected, silent
  });
  auto world = LoopbackWorld(store, 0, 2);
  ASSERT_TRUE(world);
  auto subset = ConnectRankSubset(world, {0, 1}, milliseconds(20'000));
  ASSERT_TRUE(subset.ok()) << subset.status();
  auto abandon = std::async(std::launch::async, [&world] {
    std::this_thread::sleep_for(milliseconds(300));
    AbandonMesh(*world, "test: the generation is doomed");
  });
  const auto start = std::chrono::steady_clock::now();
  int64_t value = 1;
  Status s = gloo_ops::Allreduce(*subset, &value, &value, 1, sizeof value,
                                 GetReduceFn(DataType::kInt64, ReduceOp::kSum));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  abandon.get();
  rank0_done.set_value();
  other.get();
}

}  // namespace
}  // namespace khorovod::gloo_ops
