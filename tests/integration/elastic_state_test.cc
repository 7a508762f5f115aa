// elastic::State's sync across 2 and 3 real processes: the source of the
// broadcast is the holder of the newest commit, not rank 0, and a checkpoint
// newer than every live commit is loaded and broadcast. (Failures during
// re-formation are covered by elastic_test and bench/elastic_soak.py.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "khorovod/elastic.h"
#include "multiproc.h"

namespace khorovod::testing {
namespace {

// What commit() does collectively besides its snapshot: a rank that plays a
// newcomer (a State that never committed) joins the agreement with this.
Status JoinCommitAgreement(Runtime& rt) {
  int32_t flag = 0;
  return rt.allreduce("elastic.membership", TensorView{&flag, DataType::kInt32, {1}, {}},
                      TensorView{&flag, DataType::kInt32, {1}, {}}, {ReduceOp::kMax});
}

std::string TempPath(const std::string& stem) {
  std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  for (char& c : test) c = c == '/' ? '_' : c;  // parameterized names hold a '/'
  return ::testing::TempDir() + "/" + stem + "." + std::to_string(::getpid()) + "." + test;
}

class ElasticStateTest : public ::testing::TestWithParam<int> {};

// Rank 0 holds no commit (as a rank that rolled back, or a newcomer that
// became rank 0); the last rank holds three. sync() must not let rank 0's
// stale values overwrite the newest commit.
TEST_P(ElasticStateTest, SyncBroadcastsFromTheHolderOfTheNewestCommit) {
  KH_RUN_RANKS(GetParam(), [](Runtime& rt, const RankContext& ctx) {
    elastic::State state(rt);
    std::vector<float> w(1000, -1.0f);
    state.add_tensor("w", TensorView{w.data(), DataType::kFloat32, {1000}, {}});
    int64_t& step = state.counter("step");
    const bool holder = ctx.rank == ctx.size - 1;
    for (int i = 1; i <= 3; ++i) {
      if (holder) {
        for (float& x : w) x = static_cast<float>(i);
        step = i;
        ASSERT_TRUE(state.commit().ok());
      } else {
        ASSERT_TRUE(JoinCommitAgreement(rt).ok());
      }
    }
    ASSERT_TRUE(state.sync().ok());
    EXPECT_EQ(step, 3);
    EXPECT_EQ(w, std::vector<float>(1000, 3.0f));
    EXPECT_EQ(state.committed_serial(), 3);
    // Everyone now holds commit 3: a later sync keeps it.
    ASSERT_TRUE(state.sync().ok());
    EXPECT_EQ(step, 3);
  });
}

// A first job commits with checkpoint_to(); a second job of fresh processes
// (no holder alive) resumes from the file instead of from its start.
TEST_P(ElasticStateTest, FreshWorkersResumeFromTheCheckpoint) {
  const std::string path = TempPath("khorovod-checkpoint");
  std::remove(path.c_str());
  KH_RUN_RANKS(GetParam(), [&](Runtime& rt, const RankContext&) {
    elastic::State state(rt);
    std::vector<double> w(64, 0.0);
    state.add_tensor("w", TensorView{w.data(), DataType::kFloat64, {64}, {}});
    int64_t& step = state.counter("step");
    state.checkpoint_to(path, 2);
    ASSERT_TRUE(state.sync().ok());
    for (step = 0; step < 5;) {
      for (double& x : w) x += 0.5;
      ++step;
      ASSERT_TRUE(state.commit().ok());
    }
  });
  KH_RUN_RANKS(GetParam(), [&](Runtime& rt, const RankContext& ctx) {
    elastic::State state(rt);
    std::vector<double> w(64, 100.0 + ctx.rank);
    state.add_tensor("w", TensorView{w.data(), DataType::kFloat64, {64}, {}});
    int64_t& step = state.counter("step");
    state.checkpoint_to(path, 2);
    ASSERT_TRUE(state.sync().ok());
    // Every 2nd commit was kept: commit 4, after four steps.
    EXPECT_EQ(step, 4);
    EXPECT_EQ(w, std::vector<double>(64, 2.0));
    EXPECT_EQ(state.committed_serial(), 4);
  });
  std::remove(path.c_str());
}

// A checkpoint that does not match the registered state is refused, and the
// ranks still agree (on the broadcasting rank's own values).
TEST_P(ElasticStateTest, AMismatchedCheckpointIsRefusedAndRanksStillAgree) {
  const std::string path = TempPath("khorovod-checkpoint-mismatch");
  KH_RUN_RANKS(GetParam(), [&](Runtime& rt, const RankContext&) {
    elastic::State state(rt);
    std::vector<float> small(8, 1.0f);
    state.add_tensor("w", TensorView{small.data(), DataType::kFloat32, {8}, {}});
    state.checkpoint_to(path);
    ASSERT_TRUE(state.sync().ok());
    ASSERT_TRUE(state.commit().ok());
  });
  KH_RUN_RANKS(GetParam(), [&](Runtime& rt, const RankContext& ctx) {
    elastic::State state(rt);
    std::vector<float> large(16, 7.0f + static_cast<float>(ctx.rank));
    state.add_tensor("w", TensorView{large.data(), DataType::kFloat32, {16}, {}});
    state.checkpoint_to(path);
    ASSERT_TRUE(state.sync().ok());
    Tensor all;
    ASSERT_TRUE(
        rt.allgather("check", TensorView{large.data(), DataType::kFloat32, {16}, {}}, &all).ok());
    for (int r = 0; r < ctx.size; ++r) EXPECT_EQ(all.data_as<float>()[16 * r], large[0]);
  });
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Sizes, ElasticStateTest, ::testing::Values(2, 3),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

}  // namespace
}  // namespace khorovod::testing
