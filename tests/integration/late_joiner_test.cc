// Late joiners at job end: once a worker's training finished (elastic::run
// returned, so shutdown() left the rendezvous as finished), a worker that comes to join is told the
// job is finishing, and init() returns kJobFinished at once instead of waiting for a generation
// that never forms. Real worker processes, real khorovod-rendezvous server, at 1 and 2 finishing
// workers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "khorovod/elastic.h"
#include "multiproc.h"
#include "rendezvous_process.h"

namespace khorovod::testing {
namespace {

class LateJoinerTest : public ::testing::TestWithParam<int> {};

TEST_P(LateJoinerTest, AWorkerJoiningAfterTrainingFinishedGetsJobFinished) {
  const int finishing = GetParam();
  const std::string job = "late-joiner-" + std::to_string(finishing);
  const std::string dir = ::testing::TempDir() + "/" + job + "-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string finished_marker = dir + "/finished";
  RendezvousProcess server(job, {"--min-workers", std::to_string(finishing), "--max-workers",
                                 std::to_string(finishing + 1), "--settle-ms", "200"});
  ASSERT_TRUE(server.ok()) << server.error();
  RankOptions opts;
  opts.deadline = std::chrono::seconds(90);
  opts.init = false;
  opts.env = server.WorkerEnv(job, finishing + 1);
  const int late = finishing;  // the last rank starts once training finished
  opts.start_when_file_exists[late] = finished_marker;

  KH_RUN_RANKS(
      finishing + 1,
      [&](Runtime& rt, const RankContext& ctx) {
        const auto start = std::chrono::steady_clock::now();
        Status s = rt.init(ctx.config);
        if (ctx.rank == late) {
          EXPECT_EQ(s.code(), StatusCode::kJobFinished) << s.ToString();
          EXPECT_NE(s.message().find("finishing"), std::string::npos) << s.message();
          EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20))
              << "the late joiner waited instead of being told";
          return;
        }
        ASSERT_TRUE(s.ok()) << s.ToString();
        int32_t value = 1;
        elastic::State state(rt);
        s = elastic::run(rt, state, [&] {
          value = 1;
          TensorView v{&value, DataType::kInt32, {1}, {}};
          return rt.allreduce("training", v, v, {ReduceOp::kSum});
        });
        ASSERT_TRUE(s.ok()) << s.ToString();
        EXPECT_EQ(value, finishing);
        ASSERT_TRUE(rt.shutdown().ok());  // the training loop returned: leaves as finished
        if (ctx.rank == 0) std::ofstream(finished_marker) << "1\n";
      },
      opts);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

INSTANTIATE_TEST_SUITE_P(Sizes, LateJoinerTest, ::testing::Values(1, 2),
                         [](const auto& info) { return "finishing" + std::to_string(info.param); });

}  // namespace
}  // namespace khorovod::testing
