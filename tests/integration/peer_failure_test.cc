// A peer that dies mid-training must turn into a recoverable kUnavailable on
// every surviving rank within a bounded time: no hang, no abort.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>

#include "multiproc.h"
#include "tensor_data.h"

namespace khorovod::testing {
namespace {

struct PeerFailureCase {
  int size;
  int victim;
  int64_t elements;  // small: direct exchange; large: ring
};

class PeerFailureTest : public ::testing::TestWithParam<PeerFailureCase> {};

TEST_P(PeerFailureTest, SurvivorsGetUnavailableWithinTheTimeout) {
  const PeerFailureCase c = GetParam();
  RankOptions opts;
  opts.env["KHOROVOD_TIMEOUT_SECONDS"] = "5";
  opts.expect_killed = {c.victim};
  opts.deadline = std::chrono::seconds(60);
  KH_RUN_RANKS(
      c.size,
      [c](Runtime& rt, const RankContext& ctx) {
        Tensor t = MakeTensor(DataType::kFloat32, {c.elements}, ReduceOp::kSum, ctx.rank, 1);
        for (int step = 0; step < 5; ++step) {
          ASSERT_TRUE(rt.allreduce("step", t.view(), t.view()).ok());
        }
        if (ctx.rank == c.victim) raise(SIGKILL);
        const auto start = std::chrono::steady_clock::now();
        Status s;
        // Keep training until the failure surfaces; bounded by the step count.
        for (int step = 0; step < 1000 && s.ok(); ++step)
          s = rt.allreduce("step", t.view(), t.view());
        const auto waited = std::chrono::steady_clock::now() - start;
        EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
        EXPECT_LT(waited, std::chrono::seconds(15)) << "failure took too long to surface";
        // The runtime refuses further work with the same error instead of hanging.
        EXPECT_EQ(rt.allreduce("after", t.view(), t.view()).code(), StatusCode::kUnavailable);
      },
      opts);
}

INSTANTIATE_TEST_SUITE_P(Victims, PeerFailureTest,
                         ::testing::Values(PeerFailureCase{2, 1, 16}, PeerFailureCase{3, 1, 16},
                                           PeerFailureCase{4, 2, 16}, PeerFailureCase{4, 0, 16},
                                           PeerFailureCase{4, 3, 1 << 20},
                                           PeerFailureCase{3, 0, 1 << 20}),
                         [](const auto& info) {
                           return "np" + std::to_string(info.param.size) + "_kill" +
                                  std::to_string(info.param.victim) +
                                  (info.param.elements > 1000 ? "_ring" : "_direct");
                         });

}  // namespace
}  // namespace khorovod::testing
