// The kill schedules on real NCCL (GPU only, label `gpu`): elastic workers
// train on CUDA tensors through the NCCL backend, all on one GPU when the
// machine has fewer GPUs than workers (KHOROVOD_GPU_SHARE=1, see
// backend/nccl/nccl_formation.h), under a real khorovod-rendezvous server.
// Schedules, each at 2 and 4 workers where it makes sense:
//   KillMidAllreduce   the last rank is SIGKILLed by a timer while a 16 MiB
//                      allreduce is in flight;
//   KillRankZero       rank 0 dies between steps;
//   KillDuringReform   one rank dies, then another as the re-formation starts
//                      (in its reset callback);
//   JoinerGrows        a worker joins mid-run (ncclCommGrow where the NCCL
//                      has it);
//   JoinerKilled       a joiner dies right after joining, while the others
//                      form the communicator with it.
// Every survivor must keep its process and finish with parameters equal,
// bit for bit, to the single-process reference. Each survivor prints
// "reform-ms: <schedule> N=<n> <ms>": from the SIGKILL (the victim writes
// its steady_clock time first) to the survivor's next completed allreduce.
// scripts/gpu-check.sh collects those lines and the runtime's
// "khorovod: nccl: <path>" lines (which path each re-formation took).
//
// The same source builds schedule_rehearsal_test (KH_SCHEDULES_EMULATED):
// the schedules over the emulated device backend (emulated_device.h) on
// every CI run, so their orchestration (timers, markers, joiners, expected
// deaths, final sizes) is proven without a GPU; only the memory and the
// backend differ.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "khorovod/elastic.h"
#include "multiproc.h"
#include "rendezvous_process.h"
#ifdef KH_SCHEDULES_EMULATED
#include "emulated_device.h"
#else
#include <cuda_runtime_api.h>
#endif

namespace khorovod::testing {
namespace {

constexpr int kParams = 64;
using Clock = std::chrono::steady_clock;

double Gradient(int64_t step, int j) { return static_cast<double>(((step + 1) * 5 + j * 3) % 11 - 5); }

int64_t NowNs() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

enum class Schedule { kKillMidAllreduce, kKillRankZero, kKillDuringReform, kJoinerGrows, kJoinerKilled };

const char* Name(Schedule s) {
  switch (s) {
    case Schedule::kKillMidAllreduce: return "KillMidAllreduce";
    case Schedule::kKillRankZero: return "KillRankZero";
    case Schedule::kKillDuringReform: return "KillDuringReform";
    case Schedule::kJoinerGrows: return "JoinerGrows";
    case Schedule::kJoinerKilled: return "JoinerKilled";
  }
  return "?";
}

// Device memory for one tensor (CUDA, or emulated), freed on scope exit.
// Uploads are complete when they return: the runtime's streams do not wait
// for the legacy default stream, and inputs must be ready when submitted.
class Mem {
 public:
  explicit Mem(size_t bytes) {
#ifdef KH_SCHEDULES_EMULATED
    keep_ = EmulatedAlloc(bytes);
    p = keep_.get();
#else
    EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
    keep_ = std::shared_ptr<void>(p, [](void* q) { (void)cudaFree(q); });
#endif
  }
  bool Upload(const void* host, size_t bytes) {
#ifdef KH_SCHEDULES_EMULATED
    return EmulatedCopy(p, true, host, false, bytes).ok();
#else
    return cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess;
#endif
  }
  bool Download(void* host, size_t bytes) {
#ifdef KH_SCHEDULES_EMULATED
    return EmulatedCopy(host, false, p, true, bytes).ok();
#else
    return cudaMemcpy(host, p, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
#endif
  }
  void* p = nullptr;

 private:
  std::shared_ptr<void> keep_;
};

struct Param {
  Schedule schedule;
  int workers;  // processes started (joiners included)
};

void PrintTo(const Param& p, std::ostream* os) { *os << Name(p.schedule) << " at " << p.workers; }

class NcclElasticGpu : public ::testing::TestWithParam<Param> {};

void Die(const std::string& dir) {
  std::ofstream(dir + "/killed_at") << NowNs() << "\n";
  raise(SIGKILL);
}

TEST_P(NcclElasticGpu, SurvivorsFinishBitIdentical) {
#ifndef KH_SCHEDULES_EMULATED
  if (access("/dev/nvidiactl", F_OK) != 0) GTEST_SKIP() << "no NVIDIA driver (/dev/nvidiactl missing)";
#endif
  const Param p = GetParam();
  const bool joiner = p.schedule == Schedule::kJoinerGrows || p.schedule == Schedule::kJoinerKilled;
  const int deaths = p.schedule == Schedule::kKillDuringReform ? 2
                     : p.schedule == Schedule::kJoinerGrows   ? 0
                                                              : 1;
  const int final_size = p.workers - deaths;
  const int min_workers = std::max(1, std::min(p.workers - deaths, joiner ? p.workers - 1 : p.workers - deaths));
  const std::string job = std::string("nccl-") + Name(p.schedule) + "-" + std::to_string(p.workers);
  const std::string dir = ::testing::TempDir() + "/" + job + "-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  RendezvousProcess server(job, {"--min-workers", std::to_string(min_workers), "--max-workers",
                                 std::to_string(p.workers), "--settle-ms", "300", "--heartbeat-timeout-ms", "1500",
                                 "--reform-timeout-ms", "8000"});
  ASSERT_TRUE(server.ok()) << server.error();
  RankOptions opts;
  opts.deadline = std::chrono::seconds(240);
  opts.init = false;
  opts.env = server.WorkerEnv(job, p.workers);
#ifdef KH_SCHEDULES_EMULATED
  opts.env["KHOROVOD_GPU_OPERATIONS"] = "emulated";
#else
  opts.env["KHOROVOD_GPU_OPERATIONS"] = "nccl";
#endif
  opts.env["KHOROVOD_GPU_SHARE"] = "1";
  opts.env["KHOROVOD_GPU_DEVICE"] = "0";
  opts.env["KHOROVOD_TIMEOUT_SECONDS"] = "10";
  const int late = p.workers - 1;
  if (joiner) opts.start_when_file_exists[late] = dir + "/join";
  for (int r = 0; r < p.workers; ++r) opts.may_be_killed.insert(r);
  opts.expected_deaths = deaths;
  const Schedule sched = p.schedule;
  KH_RUN_RANKS(p.workers, [&](Runtime& rt, const RankContext& ctx) {
    const bool is_late = joiner && ctx.rank == late;
    if (is_late && sched == Schedule::kJoinerKilled) {
      // Dies while the others form the communicator with it.
      std::thread([dir] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        Die(dir);
      }).detach();
    }
    Status init = rt.init(ctx.config);
    ASSERT_TRUE(init.ok()) << init;
    const int first_rank = rt.rank();
    const Device gpu{DeviceKind::kCUDA, 0};
    std::vector<double> params(kParams, 0.0);
    elastic::State state(rt);
    state.add_tensor("params", TensorView{params.data(), DataType::kFloat64, {kParams}, {}});
    int64_t& step = state.counter("step");
    bool after_reset = false;
    int resets = 0;
    state.on_reset([&] {
      ++resets;
      after_reset = true;
      // The second victim of KillDuringReform: rank 2 of the first generation.
      if (sched == Schedule::kKillDuringReform && first_rank == 2) Die(dir);
    });
    Mem grad(kParams * sizeof(double));
    const size_t bulk_n = sched == Schedule::kKillMidAllreduce ? (4u << 20) : 0;
    Mem bulk(std::max<size_t>(bulk_n * 4, 4));
    const auto give_up = Clock::now() + std::chrono::seconds(150);
    Status s = elastic::run(rt, state, [&]() -> Status {
      while (true) {
        std::vector<double> g(kParams);
        for (int j = 0; j < kParams; ++j) g[j] = Gradient(step, j);
        if (!grad.Upload(g.data(), g.size() * 8)) return Status::Internal("upload");
        const bool victim_step = step == 10 && !after_reset;
        if (victim_step && sched == Schedule::kKillMidAllreduce && first_rank == p.workers - 1) {
          std::thread([dir] {
            std::this_thread::sleep_for(std::chrono::milliseconds(30));
            Die(dir);
          }).detach();
        }
        if (victim_step && ((sched == Schedule::kKillRankZero && first_rank == 0) ||
                            (sched == Schedule::kKillDuringReform && first_rank == 3))) {
          Die(dir);
        }
        if (bulk_n) {
          TensorView b{bulk.p, DataType::kFloat32, {static_cast<int64_t>(bulk_n)}, gpu};
          KH_RETURN_IF_ERROR(rt.allreduce("bulk", b, b, {ReduceOp::kSum}));
        }
        TensorView v{grad.p, DataType::kFloat64, {kParams}, gpu};
        KH_RETURN_IF_ERROR(rt.allreduce("grad", v, v, {ReduceOp::kSum}));
        if (!grad.Download(g.data(), g.size() * 8)) return Status::Internal("download");
        if (after_reset) {
          after_reset = false;
          std::ifstream in(dir + "/killed_at");
          int64_t killed = 0;
          if (in >> killed && killed > 0) {
            std::printf("reform-ms: %s N=%d %.1f\n", Name(sched), p.workers, (NowNs() - killed) / 1e6);
            std::fflush(stdout);
          }
        }
        for (int j = 0; j < kParams; ++j) params[j] -= 0.5 * (g[j] / rt.size());
        ++step;
        KH_RETURN_IF_ERROR(state.commit());
        if (joiner && step == 5 && rt.rank() == 0) std::ofstream(dir + "/join") << "1\n";
        // Done once the schedule has played out: the world at its final size
        // after a re-formation (the joiner itself joined into it; a killed
        // joiner: once it died, whenever that was).
        const bool played = sched == Schedule::kJoinerKilled ? std::filesystem::exists(dir + "/killed_at")
                                                             : is_late || resets >= 1;
        if (step >= 30 && rt.size() == final_size && played) return Status::Ok();
        // Waiting for the schedule: slow down rather than race ahead.
        if (step >= 30) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        if (Clock::now() > give_up) {
          return Status::Internal("the schedule did not play out in time (size " + std::to_string(rt.size()) +
                                  ", wanted " + std::to_string(final_size) + ", " + std::to_string(resets) +
                                  " resets)");
        }
      }
    });
    ASSERT_TRUE(s.ok()) << s;
    std::vector<double> ref(kParams, 0.0);
    for (int64_t t = 0; t < step; ++t) {
      for (int j = 0; j < kParams; ++j) ref[j] -= 0.5 * Gradient(t, j);
    }
    EXPECT_EQ(params, ref) << "rank " << rt.rank() << " after " << resets << " resets";
    EXPECT_TRUE(rt.shutdown().ok());
  }, opts);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, NcclElasticGpu,
    ::testing::Values(Param{Schedule::kKillMidAllreduce, 2}, Param{Schedule::kKillMidAllreduce, 4},
                      Param{Schedule::kKillRankZero, 2}, Param{Schedule::kKillRankZero, 4},
                      Param{Schedule::kKillDuringReform, 4}, Param{Schedule::kJoinerGrows, 2},
                      Param{Schedule::kJoinerGrows, 4}, Param{Schedule::kJoinerKilled, 3}),
    [](const auto& info) { return std::string(Name(info.param.schedule)) + std::to_string(info.param.workers); });

}  // namespace
}  // namespace khorovod::testing
