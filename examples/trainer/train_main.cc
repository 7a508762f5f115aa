// The example trainer: data-parallel SGD on an MLP over a synthetic data set,
// Horovod style. Run it with `khorovodrun -np 4 khorovod-example-trainer`.
//
// Every rank trains on its own shard; gradients are averaged with fused
// allreduces each step; the initial weights come from rank 0 through
// broadcast_parameters. At the end every rank reports a checksum of its
// weights and rank 0 checks they all agree.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cinttypes>
#include <cstdio>

#include "dataset.h"
#include "khorovod/parameters.h"
#include "khorovod/runtime.h"
#include "mlp.h"

namespace {

using khorovod::DataType;
using khorovod::NamedTensor;
using khorovod::Status;
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

int Train(const Options& o) {
  khorovod::Runtime rt;
  if (Status s = rt.init(); !s.ok()) return Fail("init", s);
  const int rank = rt.rank(), size = rt.size();

  const auto data = khorovod::example::MakeBlobs(o.samples, o.features, o.classes, o.seed);
  const auto shard = khorovod::example::Shard(data, rank, size);
  // Deliberately different initial weights per rank: broadcast_parameters
  // must make them identical before training.
  khorovod::example::Mlp model(o.features, o.hidden, o.classes, o.seed + 1000 + rank);
  if (Status s = khorovod::broadcast_parameters(rt, Named(model.params())); !s.ok()) {
    return Fail("broadcast_parameters", s);
  }
  const double initial_loss = model.Evaluate(data).loss;
  if (rank == 0) {
    std::printf("training on %d ranks: %" PRId64 " samples (%" PRId64 " per rank), batch %d per rank, initial loss %.4f\n",
                size, data.size(), shard.size(), o.batch_size, initial_loss);
  }

  int64_t cursor = 0;
  auto window_start = std::chrono::steady_clock::now();
  for (int step = 1; step <= o.steps; ++step) {
    model.ZeroGrads();
    auto batch = model.Step(shard, cursor, o.batch_size, /*backward=*/true);
    cursor += o.batch_size;
    if (Status s = khorovod::allreduce_gradients(rt, Named(model.grads())); !s.ok()) {
      return Fail("allreduce_gradients", s);
    }
    model.ApplySgd(o.lr, o.momentum);

    if (step % o.log_every == 0 || step == o.steps) {
      float metrics[2] = {static_cast<float>(batch.loss), static_cast<float>(batch.accuracy)};
      TensorView mv{metrics, DataType::kFloat32, {2}, {}};
      if (Status s = rt.allreduce("metrics", mv, mv); !s.ok()) return Fail("metrics", s);
      const auto now = std::chrono::steady_clock::now();
      const double seconds = std::chrono::duration<double>(now - window_start).count();
      window_start = now;
      const int steps_in_window = step % o.log_every == 0 ? o.log_every : step % o.log_every;
      if (rank == 0) {
        std::printf("step %4d/%d  epoch %.2f  loss %.4f  accuracy %.3f  %.0f samples/s  world %d\n",
                    step, o.steps, static_cast<double>(cursor) / static_cast<double>(shard.size()),
                    metrics[0], metrics[1],
                    steps_in_window * o.batch_size * size / std::max(seconds, 1e-9), size);
        std::fflush(stdout);
      }
    }
  }

  const auto final_eval = model.Evaluate(data);
  int64_t checksum = static_cast<int64_t>(model.Checksum());
  TensorView cv{&checksum, DataType::kInt64, {1}, {}};
  khorovod::Tensor all;
  if (Status s = rt.allgather("checksums", cv, &all); !s.ok()) return Fail("allgather", s);
  bool agree = true;
  for (int r = 0; r < size; ++r) agree = agree && all.data_as<int64_t>()[r] == checksum;
  std::printf("rank %d parameters checksum %016" PRIx64 "\n", rank, static_cast<uint64_t>(checksum));
  if (rank == 0) {
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
  app.add_option("--batch-size", o.batch_size, "samples per rank per step")->check(CLI::PositiveNumber);
  app.add_option("--lr", o.lr, "learning rate")->check(CLI::PositiveNumber);
  app.add_option("--momentum", o.momentum, "SGD momentum")->check(CLI::Range(0.0, 1.0));
  app.add_option("--hidden", o.hidden, "hidden units")->check(CLI::PositiveNumber);
  app.add_option("--samples", o.samples, "data set size")->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "data and initialisation seed");
  app.add_option("--log-every", o.log_every, "steps between progress lines")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  return Train(o);
}
