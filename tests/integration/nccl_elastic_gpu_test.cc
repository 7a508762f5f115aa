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

double Gradient(int64_t step, int j) {
  return static_cast<double>(((step + 1) * 5 + j * 3) % 11 - 5);
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

enum class Schedule {
  kKillMidAllreduce,
  kKillRankZero,
  kKillDuringReform,
  kJoinerGrows,
  kJoinerKilled
};

const char* Name(Schedule s) {
  switch (s) {
    case Schedule::kKillMidAllreduce:
      return "KillMidAllreduce";
    case Schedule::kKillRankZero:
      return "KillRankZero";
    case Schedule::kKillDuringReform:
      return "KillDuringReform";
    case Schedule::kJoinerGrows:
      return "JoinerGrows";
    case Schedule::kJoinerKilled:
      return "JoinerKilled";
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
    return cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaDeviceSynchronize() == cudaSuccess;
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

// What one schedule is: who dies, who joins, how large the world ends.
struct Plan {
  Param p;
  bool joiner;
  int deaths;
  int final_size;
  int late;  // the joiner's process, when there is one
  std::string dir;
};

Plan MakePlan(const Param& p, const std::string& dir) {
  Plan plan{p,
            p.schedule == Schedule::kJoinerGrows || p.schedule == Schedule::kJoinerKilled,
            p.schedule == Schedule::kKillDuringReform ? 2
            : p.schedule == Schedule::kJoinerGrows    ? 0
                                                      : 1,
            0,
            p.workers - 1,
            dir};
  plan.final_size = p.workers - plan.deaths;
  return plan;
}

// One worker process of a schedule: trains until the schedule played out.
class Worker {
 public:
  Worker(Runtime& rt, const Plan& plan, int process)
      : rt_(rt),
        plan_(plan),
        sched_(plan.p.schedule),
        is_late_(plan.joiner && process == plan.late) {}

  void Run(const Config& config) {
    if (is_late_ && sched_ == Schedule::kJoinerKilled) {
      // Dies while the others form the communicator with it, or just after.
      std::thread([dir = plan_.dir] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        Die(dir);
      }).detach();
    }
    Status init = rt_.init(config);
    ASSERT_TRUE(init.ok()) << init;
    first_rank_ = rt_.rank();
    elastic::State state(rt_);
    state.add_tensor("params", TensorView{params_.data(), DataType::kFloat64, {kParams}, {}});
    step_ = &state.counter("step");
    state.on_reset([this] {
      ++resets_;
      after_reset_ = true;
      // The second victim of KillDuringReform: rank 2 of the first generation.
      if (sched_ == Schedule::kKillDuringReform && first_rank_ == 2) Die(plan_.dir);
    });
    const auto give_up = Clock::now() + std::chrono::seconds(150);
    Status s = elastic::run(rt_, state, [&]() -> Status {
      while (true) {
        KH_RETURN_IF_ERROR(Step());
        KH_RETURN_IF_ERROR(state.commit());
        if (plan_.joiner && *step_ == 5 && rt_.rank() == 0)
          std::ofstream(plan_.dir + "/join") << "1\n";
        if (*step_ >= 30 && rt_.size() == plan_.final_size && PlayedOut()) return Status::Ok();
        // Waiting for the schedule: slow down rather than race ahead.
        if (*step_ >= 30) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        if (Clock::now() > give_up) {
          return Status::Internal("the schedule did not play out in time (size " +
                                  std::to_string(rt_.size()) + ", wanted " +
                                  std::to_string(plan_.final_size) + ", " +
                                  std::to_string(resets_) + " resets)");
        }
      }
    });
    ASSERT_TRUE(s.ok()) << s;
    std::vector<double> ref(kParams, 0.0);
    for (int64_t t = 0; t < *step_; ++t) {
      for (int j = 0; j < kParams; ++j) ref[j] -= 0.5 * Gradient(t, j);
    }
    EXPECT_EQ(params_, ref) << "rank " << rt_.rank() << " after " << resets_ << " resets";
    EXPECT_TRUE(rt_.shutdown().ok());
  }

 private:
  // One training step on device tensors; the victims die on their cue.
  Status Step() {
    const Device gpu{DeviceKind::kCUDA, 0};
    std::vector<double> g(kParams);
    for (int j = 0; j < kParams; ++j) g[j] = Gradient(*step_, j);
    if (!grad_.Upload(g.data(), g.size() * 8)) return Status::Internal("upload");
    MaybeDie();
    if (bulk_n_) {
      TensorView b{bulk_.p, DataType::kFloat32, {static_cast<int64_t>(bulk_n_)}, gpu};
      KH_RETURN_IF_ERROR(rt_.allreduce("bulk", b, b, {ReduceOp::kSum}));
    }
    TensorView v{grad_.p, DataType::kFloat64, {kParams}, gpu};
    KH_RETURN_IF_ERROR(rt_.allreduce("grad", v, v, {ReduceOp::kSum}));
    if (!grad_.Download(g.data(), g.size() * 8)) return Status::Internal("download");
    if (after_reset_) ReportReform();
    for (int j = 0; j < kParams; ++j) params_[j] -= 0.5 * (g[j] / rt_.size());
    ++*step_;
    return Status::Ok();
  }

  void MaybeDie() {
    if (*step_ != 10 || resets_ > 0) return;
    if (sched_ == Schedule::kKillMidAllreduce && first_rank_ == plan_.p.workers - 1) {
      std::thread([dir = plan_.dir] {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        Die(dir);
      }).detach();
    }
    if ((sched_ == Schedule::kKillRankZero && first_rank_ == 0) ||
        (sched_ == Schedule::kKillDuringReform && first_rank_ == 3)) {
      Die(plan_.dir);
    }
  }

  // The first allreduce completed after a re-formation: time since the kill.
  void ReportReform() {
    after_reset_ = false;
    std::ifstream in(plan_.dir + "/killed_at");
    int64_t killed = 0;
    if (in >> killed && killed > 0) {
      std::printf("reform-ms: %s N=%d %.1f\n", Name(sched_), plan_.p.workers,
                  (NowNs() - killed) / 1e6);
      std::fflush(stdout);
    }
  }

  // Re-formed at least once (the joiner joined into the re-formed world; a
  // killed joiner: once it died, whenever that was).
  bool PlayedOut() const {
    if (sched_ == Schedule::kJoinerKilled) return std::filesystem::exists(plan_.dir + "/killed_at");
    return is_late_ || resets_ >= 1;
  }

  Runtime& rt_;
  const Plan& plan_;
  const Schedule sched_;
  const bool is_late_;
  int first_rank_ = -1;
  int resets_ = 0;
  bool after_reset_ = false;
  int64_t* step_ = nullptr;
  std::vector<double> params_ = std::vector<double>(kParams, 0.0);
  Mem grad_{kParams * sizeof(double)};
  size_t bulk_n_ = sched_ == Schedule::kKillMidAllreduce ? (4u << 20) : 0;
  Mem bulk_{std::max<size_t>(bulk_n_ * 4, 4)};
};

TEST_P(NcclElasticGpu, SurvivorsFinishBitIdentical) {
#ifndef KH_SCHEDULES_EMULATED
  if (access("/dev/nvidiactl", F_OK) != 0)
    GTEST_SKIP() << "no NVIDIA driver (/dev/nvidiactl missing)";
#endif
  const Param p = GetParam();
  const std::string job = std::string("nccl-") + Name(p.schedule) + "-" + std::to_string(p.workers);
  const Plan plan = MakePlan(p, ::testing::TempDir() + "/" + job + "-" + std::to_string(getpid()));
  std::filesystem::create_directories(plan.dir);
  // The first generation: everyone but a joiner (and at least the world
  // the schedule ends with).
  const int min_workers =
      std::max(1, std::min(plan.final_size, plan.joiner ? p.workers - 1 : plan.final_size));
  RendezvousProcess server(job, {"--min-workers", std::to_string(min_workers), "--max-workers",
                                 std::to_string(p.workers), "--settle-ms", "300",
                                 "--heartbeat-timeout-ms", "1500", "--reform-timeout-ms", "8000"});
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
  if (plan.joiner) opts.start_when_file_exists[plan.late] = plan.dir + "/join";
  for (int r = 0; r < p.workers; ++r) opts.may_be_killed.insert(r);
  opts.expected_deaths = plan.deaths;
  KH_RUN_RANKS(
      p.workers,
      [&](Runtime& rt, const RankContext& ctx) { Worker(rt, plan, ctx.rank).Run(ctx.config); },
      opts);
  std::error_code ec;
  std::filesystem::remove_all(plan.dir, ec);
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, NcclElasticGpu,
    ::testing::Values(Param{Schedule::kKillMidAllreduce, 2}, Param{Schedule::kKillMidAllreduce, 4},
                      Param{Schedule::kKillRankZero, 2}, Param{Schedule::kKillRankZero, 4},
                      Param{Schedule::kKillDuringReform, 4}, Param{Schedule::kJoinerGrows, 2},
                      Param{Schedule::kJoinerGrows, 4}, Param{Schedule::kJoinerKilled, 3}),
    [](const auto& info) {
      return std::string(Name(info.param.schedule)) + std::to_string(info.param.workers);
    });

}  // namespace
}  // namespace khorovod::testing
