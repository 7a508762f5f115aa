// Elastic re-formation with device tensors (emulated device memory, see
// emulated_device.h): rank 0 of three workers dies mid-run; the survivors
// reset, which drops the device backend with the session and creates a new
// one at the next generation's first device response, and they keep their
// GPU although their local ranks change. Training must continue from the
// last commit with exact results.
#include <gtest/gtest.h>
#include <signal.h>

#include "emulated_device.h"
#include "khorovod/elastic.h"
#include "multiproc.h"
#include "rendezvous_process.h"

namespace khorovod::testing {
namespace {

constexpr int kParams = 16;

double Gradient(int64_t step, int j) {
  return static_cast<double>(((step + 1) * 5 + j * 3) % 11 - 5);
}

TEST(DeviceElastic, SurvivorsRebuildTheDeviceBackendAndKeepTheirGpu) {
  RendezvousProcess server("device-elastic",
                           {"--min-workers", "2", "--max-workers", "3", "--settle-ms", "300",
                            "--heartbeat-timeout-ms", "1500", "--reform-timeout-ms", "5000"});
  ASSERT_TRUE(server.ok()) << server.error();
  RankOptions opts;
  opts.deadline = std::chrono::seconds(120);
  opts.init = false;
  opts.env = server.WorkerEnv("device-elastic", 3);
  opts.env["KHOROVOD_GPU_OPERATIONS"] = "emulated";
  opts.may_be_killed = {0, 1, 2};
  opts.expected_deaths = 1;
  KH_RUN_RANKS(
      3,
      [&](Runtime& rt, const RankContext& ctx) {
        ASSERT_TRUE(rt.init(ctx.config).ok());
        // The GPU of the first generation (local rank), for the whole run.
        const Device gpu{DeviceKind::kCUDA, rt.local_rank()};
        const bool victim = rt.rank() == 0;
        std::vector<double> params(kParams, 0.0);
        elastic::State state(rt);
        state.add_tensor("params", TensorView{params.data(), DataType::kFloat64, {kParams}, {}});
        int64_t& step = state.counter("step");
        int resets = 0;
        state.on_reset([&resets] { ++resets; });
        Status s = elastic::run(rt, state, [&]() -> Status {
          while (true) {
            Tensor g(DataType::kFloat64, {kParams});
            for (int j = 0; j < kParams; ++j) g.data_as<double>()[j] = Gradient(step, j);
            DeviceTensor dg = DeviceTensor::From(g, gpu);
            KH_RETURN_IF_ERROR(rt.allreduce("grad", dg.view(), dg.view()));
            const Tensor& avg = dg.Download();
            for (int j = 0; j < kParams; ++j) params[j] -= 0.5 * avg.data_as<double>()[j];
            ++step;
            KH_RETURN_IF_ERROR(state.commit());
            if (victim && step == 10) raise(SIGKILL);
            if (step >= 25 && rt.size() == 2) return Status::Ok();
            if (step >= 20000) return Status::Internal("the world never shrank to 2");
          }
        });
        ASSERT_TRUE(s.ok()) << s;
        EXPECT_GE(resets, 1);
        // One backend per generation that ran device work, only the last alive.
        EXPECT_EQ(EmulatedBackendsCreated(), 1 + resets);
        EXPECT_EQ(EmulatedBackendsAlive(), 1);
        std::vector<double> ref(kParams, 0.0);
        for (int64_t t = 0; t < step; ++t) {
          for (int j = 0; j < kParams; ++j) ref[j] -= 0.5 * Gradient(t, j);
        }
        EXPECT_EQ(params, ref);
        EXPECT_TRUE(rt.shutdown().ok());
        EXPECT_EQ(EmulatedBackendsAlive(), 0);
      },
      opts);
}

}  // namespace
}  // namespace khorovod::testing
