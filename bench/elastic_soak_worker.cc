// khorovod-soak-worker - the worker that bench/elastic_soak.py kills.
//
//   khorovodrun -np 4 --min-np 2 --max-np 4 khorovod-soak-worker --dir D
//       [--steps 400] [--step-ms 4] [--state-mb 0] [--checkpoint PATH --checkpoint-every K]
//
// --checkpoint writes rank 0's state to PATH every K commits and resumes
// from it when no live worker holds a newer commit (elastic::State::
// checkpoint_to): bench/goodput.py's checkpoint-restart runs.
//
// Trains a toy model whose result is known in advance: every rank's gradient
// is an integer-valued float vector g(step) + (2 * rank - (size - 1)), summed
// across ranks (exact in float32) and divided by the world size, so the
// average is g(step) on every rank and at every world size. The parameters
// after N steps therefore equal a local replay of N updates, bit for bit,
// whatever failed and re-formed on the way. A lost or doubled step, a state
// restored from the wrong rank, or a torn broadcast changes the checksum.
//
// --state-mb adds a buffer of that size to the elastic State (touched every
// step), so that each re-formation broadcasts a large state.
//
// Each process appends one line per event to D/events.<pid>, stamped with
// CLOCK_MONOTONIC nanoseconds (comparable with the driver's clock):
//   start  <t>
//   reset  <t> <rank> <size> <step>      before the sync of a new generation
//   gen    <t> <rank> <size> <step>      after that sync (the step resumed from)
//   commit <t> <step>
//   done   <t> <rank> <size> <step> <checksum> <expected> <big_ok>
// Lines are written with one write(2) each and flushed at once, so the driver
// sees a commit before the process can be killed after it.
//
// Single-threaded (the training thread); the runtime runs its own threads.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "khorovod/elastic.h"
#include "khorovod/runtime.h"

namespace {

using khorovod::DataType;
using khorovod::Status;
using khorovod::StatusCode;
using khorovod::TensorView;

struct Options {
  std::string dir;
  int64_t steps = 400;
  int step_ms = 4;
  int state_mb = 0;
  std::string checkpoint;
  int checkpoint_every = 50;
};

constexpr int kParams = 4096;
constexpr float kLearningRate = 1.0f / 1024;  // a power of two: updates stay exact longer

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Appends whole lines to one file with O_APPEND, one write per line.
class EventLog {
 public:
  explicit EventLog(const std::string& dir)
      : fd_(::open((dir + "/events." + std::to_string(::getpid())).c_str(),
                   O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) {}
  ~EventLog() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  void Write(const std::string& kind, const std::string& fields) {
    const std::string line =
        kind + " " + std::to_string(NowNs()) + (fields.empty() ? "" : " ") + fields + "\n";
    if (::write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
      std::perror("soak worker: write");
  }

 private:
  int fd_;
};

// The integer-valued base gradient of `step` for parameter i: in [-8, 8].
float BaseGradient(int64_t step, int i) {
  return static_cast<float>((step * 7 + i * 13) % 17) - 8.0f;
}

void ApplyUpdate(std::vector<float>& params, const std::vector<float>& mean_grad) {
  for (size_t i = 0; i < params.size(); ++i) params[i] -= kLearningRate * mean_grad[i];
}

uint64_t Checksum(const std::vector<float>& v) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the bytes
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Whether the large state holds what `steps` correct steps leave in it: each
// step adds 1 to element step % size.
bool BigStateIsExact(const std::vector<float>& big, int64_t steps) {
  const auto n = static_cast<int64_t>(big.size());
  for (int64_t k = 0; k < n; ++k) {
    const int64_t touched = steps / n + (k < steps % n ? 1 : 0);
    if (big[static_cast<size_t>(k)] != static_cast<float>(touched)) return false;
  }
  return true;
}

// The parameters a correct run holds after `steps` steps.
std::vector<float> Replay(int64_t steps) {
  std::vector<float> params(kParams, 0.0f), grad(kParams);
  for (int64_t s = 0; s < steps; ++s) {
    for (int i = 0; i < kParams; ++i) grad[i] = BaseGradient(s, i);
    ApplyUpdate(params, grad);
  }
  return params;
}

std::string Fields(std::initializer_list<int64_t> values) {
  std::string out;
  for (int64_t v : values) out += (out.empty() ? "" : " ") + std::to_string(v);
  return out;
}

int Run(const Options& o) {
  EventLog log(o.dir);
  if (!log.ok()) {
    std::fprintf(stderr, "soak worker: cannot open an event file in %s\n", o.dir.c_str());
    return 2;
  }
  log.Write("start", "");
  khorovod::Runtime rt;
  if (Status s = rt.init(); !s.ok()) {
    std::fprintf(stderr, "soak worker: init: %s\n", s.ToString().c_str());
    // A late joiner of a job whose training finished has nothing to do.
    return s.code() == StatusCode::kJobFinished ? 0 : 1;
  }
  std::vector<float> params(kParams, 0.0f), grad(kParams);
  std::vector<float> big(static_cast<size_t>(o.state_mb) * (1 << 20) / sizeof(float), 0.0f);
  khorovod::elastic::State state(rt);
  state.add_tensor("params", TensorView{params.data(), DataType::kFloat32, {kParams}, {}});
  if (!big.empty()) {
    state.add_tensor(
        "big", TensorView{big.data(), DataType::kFloat32, {static_cast<int64_t>(big.size())}, {}});
  }
  int64_t& step = state.counter("step");
  if (!o.checkpoint.empty()) state.checkpoint_to(o.checkpoint, o.checkpoint_every);
  state.on_reset([&] { log.Write("reset", Fields({rt.rank(), rt.size(), step})); });

  const TensorView grad_view{grad.data(), DataType::kFloat32, {kParams}, {}};
  khorovod::AllreduceOptions sum;
  sum.op = khorovod::ReduceOp::kSum;
  Status trained = khorovod::elastic::run(rt, state, [&]() -> Status {
    log.Write("gen", Fields({rt.rank(), rt.size(), step}));
    while (step < o.steps) {
      if (o.step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.step_ms));
      const float offset = static_cast<float>(2 * rt.rank() - (rt.size() - 1));
      for (int i = 0; i < kParams; ++i) grad[i] = BaseGradient(step, i) + offset;
      KH_RETURN_IF_ERROR(rt.allreduce("grad", grad_view, grad_view, sum));
      for (float& g : grad) g /= static_cast<float>(rt.size());
      ApplyUpdate(params, grad);
      if (!big.empty()) big[static_cast<size_t>(step) % big.size()] += 1.0f;
      ++step;
      Status committed = state.commit();
      log.Write("commit", std::to_string(step));
      KH_RETURN_IF_ERROR(committed);
    }
    return Status::Ok();
  });
  if (!trained.ok()) {
    std::fprintf(stderr, "soak worker: training: %s\n", trained.ToString().c_str());
    return trained.code() == StatusCode::kJobFinished ? 0 : 1;
  }
  const uint64_t checksum = Checksum(params), expected = Checksum(Replay(step));
  const bool big_ok = BigStateIsExact(big, step);
  log.Write("done", Fields({rt.rank(), rt.size(), step}) + " " + std::to_string(checksum) + " " +
                        std::to_string(expected) + " " + (big_ok ? "1" : "0"));
  if (Status s = rt.shutdown(); !s.ok())
    std::fprintf(stderr, "soak worker: shutdown: %s\n", s.ToString().c_str());
  return checksum == expected && big_ok ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"khorovod elastic soak worker (driven by bench/elastic_soak.py)"};
  Options o;
  app.add_option("--dir", o.dir, "directory for the event files")->required();
  app.add_option("--steps", o.steps, "training steps")->check(CLI::PositiveNumber);
  app.add_option("--step-ms", o.step_ms, "simulated compute per step")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--state-mb", o.state_mb, "extra elastic state, in MiB")
      ->check(CLI::Range(0, 4096));
  app.add_option("--checkpoint", o.checkpoint, "write rank 0's state here and resume from it");
  app.add_option("--checkpoint-every", o.checkpoint_every, "commits between checkpoints")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  return Run(o);
}
