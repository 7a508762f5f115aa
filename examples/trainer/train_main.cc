// The example trainer: data-parallel SGD on an MLP over a synthetic data set,
// Horovod style. Run it with `khorovodrun -np 4 khorovod-example-trainer`.
//
// Every rank trains on its own slice of each step's data; gradients are
// averaged with fused allreduces; the parameters, momentum and step counter
// live in an elastic State, committed every step. Under
// `khorovodrun --min-np/--max-np` the job survives workers failing and
// joining: the ring re-forms and training resumes from the last commit,
// with the state broadcast from the new rank 0. At the end every rank
// reports a checksum of its weights and rank 0 checks they all agree.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "dataset.h"
#include "khorovod/elastic.h"
#include "khorovod/parameters.h"
#include "khorovod/runtime.h"
#include "mlp.h"

namespace {

using khorovod::DataType;
using khorovod::NamedTensor;
using khorovod::Status;
using khorovod::StatusCode;
using khorovod::TensorView;

struct Options {
  int steps = 300;
  int batch_size = 32;
  float lr = 0.05f;
  float momentum = 0.9f;
  int features = 16;
  int hidden = 32;
  int classes = 8;
  int64_t samples = 16384;
  uint64_t seed = 1;
  int log_every = 25;
  int64_t fail_at_step = 0;  // 0: never
  double train_seconds = 0;  // 0: no time limit, --steps alone
};

TensorView View(std::vector<float>& v) {
  return TensorView{v.data(), DataType::kFloat32, {static_cast<int64_t>(v.size())}, {}};
}

std::vector<NamedTensor> Named(khorovod::example::Parameters& p) {
  return {{"w1", View(p.w1)}, {"b1", View(p.b1)}, {"w2", View(p.w2)}, {"b2", View(p.b2)}};
}

int Fail(const char* what, const Status& s) {
  std::fprintf(stderr, "trainer: %s: %s\n", what, s.ToString().c_str());
  return 1;
}

// Where this process sits, and the GPU it was given (khorovod-slots sets
// CUDA_VISIBLE_DEVICES per slot from the device plugin's allocation): the
// real-node GPU test checks each process's device against its local rank.
void PrintPlacement(const khorovod::Runtime& rt) {
  const char* device = std::getenv("CUDA_VISIBLE_DEVICES");
  std::printf(
      "placement: rank %d local_rank %d local_size %d cross_rank %d cross_size %d device %s\n",
      rt.rank(), rt.local_rank(), rt.local_size(), rt.cross_rank(), rt.cross_size(),
      device && *device ? device : "none");
  std::fflush(stdout);
}

// --train-seconds: whether the job has trained long enough, by the longest
// any rank has trained (its own clock since it began: a replacement that
// joined late does not hold the others back). A max-allreduce, so every rank
// gets the same answer and all stop at the same step.
khorovod::StatusOr<bool> TrainedLongEnough(khorovod::Runtime& rt,
                                           std::chrono::steady_clock::time_point started,
                                           double limit) {
  float seconds = std::chrono::duration<float>(std::chrono::steady_clock::now() - started).count();
  TensorView sv{&seconds, DataType::kFloat32, {1}, {}};
  khorovod::AllreduceOptions longest;
  longest.op = khorovod::ReduceOp::kMax;
  KH_RETURN_IF_ERROR(rt.allreduce("trained_seconds", sv, sv, longest));
  return seconds >= limit;
}

// An elastic worker that came to join after another one finished training
// (docs/elastic.md, "Late joiners"): the job is done, so this one exits 0.
int LateForTheEnd(const Status& s) {
  std::printf("trainer: the job finished before this worker joined; exiting (%s)\n",
              s.message().c_str());
  return 0;
}

// --train-seconds: whether every rank stops after this step (rank 0 says so).
khorovod::StatusOr<bool> TimeIsUp(khorovod::Runtime& rt,
                                  std::chrono::steady_clock::time_point started, const Options& o,
                                  int64_t step) {
  if (o.train_seconds <= 0) return false;
  khorovod::StatusOr<bool> enough = TrainedLongEnough(rt, started, o.train_seconds);
  if (enough.ok() && *enough && rt.rank() == 0)
    std::printf("stopping after step %" PRId64 ": trained %.0f s (--train-seconds)\n", step,
                o.train_seconds);
  return enough;
}

int Train(const Options& o) {
  khorovod::Runtime rt;
  if (Status s = rt.init(); !s.ok()) {
    // A late joiner of an elastic job whose training finished: nothing to do.
    return s.code() == StatusCode::kJobFinished ? LateForTheEnd(s) : Fail("init", s);
  }

  const auto data = khorovod::example::MakeBlobs(o.samples, o.features, o.classes, o.seed);
  // Deliberately different initial weights per rank: the first sync (a
  // broadcast from rank 0) must make them identical before training.
  khorovod::example::Mlp model(o.features, o.hidden, o.classes, o.seed + 1000 + rt.rank());
  khorovod::elastic::State state(rt);
  for (auto& t : Named(model.params())) state.add_tensor("param." + t.name, t.view);
  for (auto& t : Named(model.velocity())) state.add_tensor("velocity." + t.name, t.view);
  int64_t& step = state.counter("step");
  PrintPlacement(rt);
  state.on_reset([&] {
    PrintPlacement(rt);
    if (rt.rank() == 0) {
      std::printf("ring re-formed: world size %d; resuming from committed step %" PRId64 "\n",
                  rt.size(), step);
      std::fflush(stdout);
    }
  });
  const double initial_loss = model.Evaluate(data).loss;
  if (rt.rank() == 0) {
    std::printf("training on %d ranks: %" PRId64 " samples, batch %d per rank, initial loss %.4f\n",
                rt.size(), data.size(), o.batch_size, initial_loss);
  }

  const auto started = std::chrono::steady_clock::now();
  auto window_start = started;
  int64_t window_samples = 0;
  Status trained = khorovod::elastic::run(rt, state, [&]() -> Status {
    while (step < o.steps) {
      rt.begin_step();  // step marks feed the worker's metrics (docs/observability.md)
      // Rank r of n takes the r-th slice of the step's n batches, so the
      // data is sharded by rank whatever the current world size.
      const int64_t begin = ((step * rt.size() + rt.rank()) * o.batch_size) % data.size();
      model.ZeroGrads();
      auto batch = model.Step(data, begin, o.batch_size, /*backward=*/true);
      KH_RETURN_IF_ERROR(khorovod::allreduce_gradients(rt, Named(model.grads())));
      model.ApplySgd(o.lr, o.momentum);
      ++step;
      window_samples += static_cast<int64_t>(o.batch_size) * rt.size();
      KH_RETURN_IF_ERROR(state.commit());
      rt.end_step(o.batch_size);
      if (o.fail_at_step > 0 && step == o.fail_at_step && rt.rank() == 1) {
        std::printf("rank 1: simulating a crash after committing step %" PRId64 "\n", step);
        std::fflush(stdout);
        raise(SIGKILL);
      }
      if (step % o.log_every == 0 || step == o.steps) {
        float metrics[2] = {static_cast<float>(batch.loss), static_cast<float>(batch.accuracy)};
        TensorView mv{metrics, DataType::kFloat32, {2}, {}};
        KH_RETURN_IF_ERROR(rt.allreduce("metrics", mv, mv));
        const auto now = std::chrono::steady_clock::now();
        const double seconds = std::chrono::duration<double>(now - window_start).count();
        if (rt.rank() == 0) {
          std::printf("step %4" PRId64 "/%d  loss %.4f  accuracy %.3f  %.0f samples/s  world %d\n",
                      step, o.steps, metrics[0], metrics[1],
                      window_samples / std::max(seconds, 1e-9), rt.size());
          std::fflush(stdout);
        }
        window_start = now;
        window_samples = 0;
        khorovod::StatusOr<bool> time_up = TimeIsUp(rt, started, o, step);
        if (!time_up.ok()) return time_up.status();
        if (*time_up) break;
      }
    }
    return Status::Ok();
  });
  if (!trained.ok()) {
    return trained.code() == StatusCode::kJobFinished ? LateForTheEnd(trained)
                                                      : Fail("training", trained);
  }

  const auto final_eval = model.Evaluate(data);
  int64_t checksum = static_cast<int64_t>(model.Checksum());
  TensorView cv{&checksum, DataType::kInt64, {1}, {}};
  khorovod::Tensor all;
  if (Status s = rt.allgather("checksums", cv, &all); !s.ok()) return Fail("allgather", s);
  const int size = rt.size();
  bool agree = true;
  for (int r = 0; r < size; ++r) agree = agree && all.data_as<int64_t>()[r] == checksum;
  std::printf("rank %d parameters checksum %016" PRIx64 "\n", rt.rank(),
              static_cast<uint64_t>(checksum));
  if (rt.rank() == 0) {
    std::printf("final loss %.4f (initial %.4f), accuracy %.3f over all %" PRId64 " samples\n",
                final_eval.loss, initial_loss, final_eval.accuracy, data.size());
    std::printf(agree ? "all %d ranks agree on the parameters\n"
                      : "ERROR: ranks disagree on the parameters (%d ranks)\n",
                size);
  }
  if (Status s = rt.shutdown(); !s.ok()) return Fail("shutdown", s);
  return agree ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"khorovod example trainer: data-parallel SGD on a synthetic data set"};
  Options o;
  app.add_option("--steps", o.steps, "training steps")->check(CLI::PositiveNumber);
  app.add_option("--batch-size", o.batch_size, "samples per rank per step")
      ->check(CLI::PositiveNumber);
  app.add_option("--lr", o.lr, "learning rate")->check(CLI::PositiveNumber);
  app.add_option("--momentum", o.momentum, "SGD momentum")->check(CLI::Range(0.0, 1.0));
  app.add_option("--hidden", o.hidden, "hidden units")->check(CLI::PositiveNumber);
  app.add_option("--samples", o.samples, "data set size")->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "data and initialisation seed");
  app.add_option("--log-every", o.log_every, "steps between progress lines")
      ->check(CLI::PositiveNumber);
  app.add_option("--fail-at-step", o.fail_at_step,
                 "rank 1 kills itself right after committing this step (elastic demo)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--train-seconds", o.train_seconds,
                 "stop, on every rank at the same step, at the first progress line after any rank "
                 "trained this long "
                 "(--steps still caps it)")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  return Train(o);
}
