#include "elastic_recovery_worker.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include "khorovod/elastic.h"
#include "khorovod/runtime.h"

namespace khorovod::bench {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Written to a temporary name and renamed, so the driver never reads half a line.
bool WriteLine(const std::string& dir, const std::string& name, const std::string& line) {
  const std::string tmp = dir + "/." + name + ".tmp";
  {
    std::ofstream out(tmp);
    out << line << '\n';
    if (!out.flush()) return false;
  }
  return std::rename(tmp.c_str(), (dir + "/" + name).c_str()) == 0;
}

std::string WorkerName() {
  const char* name = std::getenv("KHOROVOD_WORKER_NAME");
  return name != nullptr && *name != '\0' ? name : "pid" + std::to_string(::getpid());
}

}  // namespace

int run_recovery_worker(const RecoveryWorkerOptions& o) {
  const int64_t process_start = NowNs();
  const std::string me = WorkerName();
  Runtime rt;
  if (Status s = rt.init(); !s.ok()) {
    std::fprintf(stderr, "bench worker %s: init: %s\n", me.c_str(), s.ToString().c_str());
    return 1;
  }
  const int64_t init_done = NowNs();

  std::vector<float> grad(256, 1.0f);
  const TensorView grad_view{
      grad.data(), DataType::kFloat32, {static_cast<int64_t>(grad.size())}, {}};
  elastic::State state(rt);
  int64_t& trial = state.counter("trial");
  int64_t& armed = state.counter("armed");
  int64_t& step = state.counter("step");

  // Whether this rank went through a reset (or joined) since it committed the
  // arm step: in the generation after a kill, every rank has.
  bool past_kill = true;  // a worker started now joins after a kill (or at the start)
  bool newcomer = true;   // has not yet timed its first allreduce
  int64_t failed_at = 0;
  int64_t reset_done = 0;
  state.on_reset([&] {
    past_kill = true;
    reset_done = NowNs();
  });

  auto train = [&]() -> Status {
    // After the last trial the job waits for the last replacement to join, so
    // that it is timed too and nobody is left waiting for a generation.
    while (trial < o.trials || armed != 0 || rt.size() < o.full_size) {
      if (step >= o.max_steps) {
        return Status::FailedPrecondition("bench worker: " + std::to_string(o.max_steps) +
                                          " steps without finishing the trials");
      }
      const bool kill_step = armed != 0 && !past_kill;
      if (o.trace) {
        std::fprintf(stderr, "%s: step %ld rank %d/%d trial %ld armed %ld past_kill %d\n",
                     me.c_str(), (long)step, rt.rank(), rt.size(), (long)trial, (long)armed,
                     past_kill ? 1 : 0);
      }
      if (kill_step && rt.rank() == static_cast<int>(trial % rt.size())) {
        WriteLine(o.dir, "kill." + std::to_string(trial), std::to_string(NowNs()));
        std::raise(SIGKILL);
      }
      if (!kill_step && o.step_ms > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(o.step_ms));
      if (Status s = rt.allreduce("grad", grad_view, grad_view); !s.ok()) {
        failed_at = NowNs();
        if (o.trace) std::fprintf(stderr, "%s: allreduce: %s\n", me.c_str(), s.ToString().c_str());
        return s;
      }
      const int64_t done = NowNs();
      if (newcomer) {
        newcomer = false;
        if (armed != 0 || trial > 0) {  // a replacement, not one of the first workers
          WriteLine(o.dir, "join." + me,
                    std::to_string(trial) + " " + std::to_string(process_start) + " " +
                        std::to_string(init_done) + " " + std::to_string(done));
        }
      } else if (armed != 0 && past_kill) {
        WriteLine(o.dir, "recover." + std::to_string(trial) + "." + me,
                  std::to_string(failed_at) + " " + std::to_string(reset_done) + " " +
                      std::to_string(done));
      }
      ++step;
      if (armed != 0 && past_kill) {
        armed = 0;
        ++trial;
      } else if (armed == 0 && rt.size() == o.full_size && trial < o.trials) {
        armed = 1;
        past_kill = false;
      }
      KH_RETURN_IF_ERROR(state.commit());
    }
    return Status::Ok();
  };

  elastic::RunOptions run_options;
  run_options.reset_limit = 4 * o.trials + 10;
  Status s = elastic::run(
      rt, state,
      [&] {
        Status r = train();
        if (o.trace)
          std::fprintf(stderr, "%s: train returned %s\n", me.c_str(), r.ToString().c_str());
        return r;
      },
      run_options);
  if (!s.ok()) {
    std::fprintf(stderr, "bench worker %s: %s\n", me.c_str(), s.ToString().c_str());
    return 1;
  }
  if (Status down = rt.shutdown(); !down.ok()) {
    std::fprintf(stderr, "bench worker %s: shutdown: %s\n", me.c_str(), down.ToString().c_str());
  }
  return 0;
}

}  // namespace khorovod::bench
