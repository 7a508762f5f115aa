// Local ranks by node (KHOROVOD_LOCAL_RANKS=node): real worker processes and
// a real khorovod-rendezvous server. Three "pods" (loopback addresses): pod
// 127.0.0.1 runs two ranks and pod 127.0.0.2 one, both on node a; pod
// 127.0.0.3 runs one on node b. By pod the API counts three hosts of 2, 1
// and 1 ranks; by node it counts node a's three ranks (pod .1's first, in
// its own order) and node b's one. The collectives give the exact sum
// either way.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "multiproc.h"
#include "rendezvous_process.h"

namespace khorovod::testing {
namespace {

constexpr int kWorkers = 4;

struct Where {
  const char* address;
  int slots;  // ranks of its pod
  int node;   // 0: node a, 1: node b
};
// By fork index.
constexpr Where kWhere[kWorkers] = {
    {"127.0.0.1", 2, 0}, {"127.0.0.1", 2, 0}, {"127.0.0.2", 1, 0}, {"127.0.0.3", 1, 1}};

class NodePlacementTest : public ::testing::TestWithParam<std::string> {};

TEST_P(NodePlacementTest, TheApiCountsWhatLocalRanksSays) {
  const std::string mode = GetParam();
  const bool by_node = mode == "node";
  const std::string job = "node-placement-" + mode;
  RendezvousProcess server(job, {"--min-workers", std::to_string(kWorkers), "--max-workers",
                                 std::to_string(kWorkers), "--settle-ms", "200"});
  ASSERT_TRUE(server.ok()) << server.error();
  RankOptions opts;
  opts.init = false;
  opts.env = server.WorkerEnv(job, 1);
  opts.env["KHOROVOD_LOCAL_RANKS"] = mode;
  opts.rank_env = [](int index, std::map<std::string, std::string>& env) {
    env["KHOROVOD_HOSTNAME"] = kWhere[index].address;
    env["KHOROVOD_SLOTS"] = std::to_string(kWhere[index].slots);
    env["KHOROVOD_NODE_NAME"] = kWhere[index].node == 0 ? "node-a" : "node-b";
  };

  KH_RUN_RANKS(
      kWorkers,
      [&](Runtime& rt, const RankContext& ctx) {
        ASSERT_TRUE(rt.init(ctx.config).ok());
        const Topology t = rt.topology();
        // Everyone's (fork index, local_rank, local_size, cross_rank, cross_size).
        int32_t mine[5] = {ctx.rank, t.local_rank, t.local_size, t.cross_rank, t.cross_size};
        Tensor all;
        TensorView in{mine, DataType::kInt32, {1, 5}, {}};
        ASSERT_TRUE(rt.allgather("placements", in, &all).ok());
        const auto* rows = reinterpret_cast<const int32_t*>(all.storage.data());
        std::map<std::string, std::set<int>> local_ranks;  // node or pod -> local ranks
        std::map<std::string, std::set<int>> cross_ranks;  // node or pod -> cross ranks
        for (int r = 0; r < kWorkers; ++r) {
          const int32_t* row = rows + 5 * r;
          const Where& w = kWhere[row[0]];
          const std::string group = by_node ? std::to_string(w.node) : w.address;
          local_ranks[group].insert(row[1]);
          cross_ranks[group].insert(row[3]);
          EXPECT_EQ(row[2], by_node ? (w.node == 0 ? 3 : 1) : w.slots) << "rank " << r;
          EXPECT_EQ(row[4], by_node ? 2 : 3) << "rank " << r;
        }
        std::set<int> groups_cross;
        for (const auto& [group, ranks] : local_ranks) {
          std::set<int> want;
          for (int i = 0; i < static_cast<int>(ranks.size()); ++i) want.insert(i);
          EXPECT_EQ(ranks, want) << group << ": local ranks 0..n-1";
          ASSERT_EQ(cross_ranks[group].size(), 1u) << group << ": one cross rank";
          groups_cross.insert(*cross_ranks[group].begin());
        }
        EXPECT_EQ(groups_cross.size(), local_ranks.size()) << "each group its own cross rank";
        EXPECT_EQ(local_ranks.size(), by_node ? 2u : 3u);
        int64_t value = t.rank + 1;
        TensorView v{&value, DataType::kInt64, {1}, {}};
        ASSERT_TRUE(rt.allreduce("sum", v, v, {ReduceOp::kSum}).ok());
        EXPECT_EQ(value, kWorkers * (kWorkers + 1) / 2);
        ASSERT_TRUE(rt.shutdown().ok());
      },
      opts);
}

INSTANTIATE_TEST_SUITE_P(LocalRanks, NodePlacementTest, ::testing::Values("pod", "node"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace khorovod::testing
