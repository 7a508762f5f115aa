// Allreduce benchmark in the style of nccl-tests, run under khorovodrun:
//
//   khorovodrun -np 4 khorovod-bench-allreduce [--mode sweep|resnet|latency|all]
//
// Every measurement times khorovod and raw Gloo (gloo::allreduce on a second
// Gloo context with Gloo's own sum) in alternating blocks within the same
// run, so their ratio is not skewed by machine noise between runs.
//   sweep:   float32 sum allreduce from --min-bytes to --max-bytes, doubling;
//            time, algbw and busbw = algbw * 2(n-1)/n for both, and the
//            GB/s of a memcpy of the same bytes on every rank at once.
//            KHOROVOD_CPU_OPERATIONS picks khorovod's backend (gloo, shm).
//   resnet:  one step = the 161 ResNet-50 gradients as separate named
//            allreduces (fused by the runtime) vs one allreduce of the same
//            total bytes.
//   algos:   the data path alone, no runtime: Gloo's ring (gloo::allreduce),
//            khorovod's span ring and the one-hop direct exchange, on the
//            raw context, alternating; times relative to Gloo's.
//   latency: a 4-byte allreduce per step; the difference to raw Gloo is the
//            per-step cost of negotiation and the thread hand-off.
//   backends: the two host data planes KHOROVOD_CPU_OPERATIONS chooses
//            between, gloo (flat) and shm (shared memory within a host;
//            hierarchical across hosts of equal rank counts), each built by
//            the backend registry on its own Gloo context and called
//            directly (no negotiation, which both would share), alternating
//            blocks; float32 sum from --min-bytes to --max-bytes. For
//            simulated hosts see bench/hierarchical_netns.sh.
// Times are the median over --reps blocks of each rank's mean, maxed over ranks.
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/context.h>
#include <gloo/math.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <vector>

#include "backend/gloo/gloo_direct.h"
#include "backend/gloo/gloo_ring.h"
#include "backend/registry.h"
#include "bootstrap/gloo_bootstrap.h"
#include "khorovod/runtime.h"
#include "resnet50_shapes.h"

namespace {

using namespace khorovod;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string mode = "all";
  int64_t min_bytes = 8;
  int64_t max_bytes = 256 << 20;
  int reps = 3;
  int latency_iters = 300;
  int resnet_steps = 3;
};

class Bench {
 public:
  Bench(Runtime& rt, std::shared_ptr<gloo::Context> raw, const Options& o)
      : rt_(rt), raw_(std::move(raw)), o_(o) {}

  void RawBarrier() {
    gloo::BarrierOptions b(raw_);
    gloo::barrier(b);
  }

  void RawAllreduce(float* data, size_t count) {
    gloo::AllreduceOptions opts(raw_);
    opts.setOutput(data, count);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    gloo::allreduce(opts);
  }

  void Ours(const std::string& name, float* data, size_t count) {
    TensorView v{data, DataType::kFloat32, {static_cast<int64_t>(count)}, {}};
    Status s = rt_.allreduce(name, v, v, {ReduceOp::kSum});
    if (!s.ok()) throw std::runtime_error(s.ToString());
  }

  // Mean seconds per call of fn over `iters` calls, maxed across ranks.
  double Time(int iters, const std::function<void()>& fn) {
    RawBarrier();
    const auto start = Clock::now();
    for (int i = 0; i < iters; ++i) fn();
    double mean = std::chrono::duration<double>(Clock::now() - start).count() / iters;
    return MaxAcrossRanks(mean);
  }

  double MaxAcrossRanks(double v) {
    gloo::AllreduceOptions opts(raw_);
    opts.setOutput(&v, 1);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<double>));
    gloo::allreduce(opts);
    return v;
  }

  // Median over reps of alternating blocks, one block of each fn per rep.
  std::vector<double> CompareAll(int iters, const std::vector<std::function<void()>>& fns) {
    std::vector<std::vector<double>> t(fns.size());
    for (const auto& fn : fns) fn();  // warm-up: negotiation, cache fill, buffer allocation
    for (int r = 0; r < o_.reps; ++r) {
      for (size_t i = 0; i < fns.size(); ++i) t[i].push_back(Time(iters, fns[i]));
    }
    std::vector<double> medians;
    for (auto& v : t) {
      std::sort(v.begin(), v.end());
      medians.push_back(v[v.size() / 2]);
    }
    return medians;
  }

  std::pair<double, double> Compare(int iters, const std::function<void()>& ours,
                                    const std::function<void()>& raw) {
    const auto m = CompareAll(iters, {ours, raw});
    return {m[0], m[1]};
  }

  void Sweep() {
    const int n = rt_.size();
    Print("# sweep: float32 sum allreduce, %d ranks; time in us, bandwidth in GB/s\n", n);
    Print("# %12s %12s | %10s %8s %8s | %10s %8s %8s | %6s | %8s\n", "bytes", "count", "ours_us",
          "algbw", "busbw", "gloo_us", "algbw", "busbw", "ratio", "memcpy");
    for (int64_t bytes = o_.min_bytes; bytes <= o_.max_bytes; bytes *= 2) {
      const size_t count = static_cast<size_t>(std::max<int64_t>(bytes / 4, 1));
      std::vector<float> data(count, 1.0f), copy(count);
      const int iters = static_cast<int>(std::clamp<int64_t>((int64_t{32} << 20) / bytes, 2, 200));
      // memcpy: every rank copies the same bytes at once, the stream a
      // shared-memory transport competes with.
      const auto m =
          CompareAll(iters, {[&] { Ours("sweep", data.data(), count); },
                             [&] { RawAllreduce(data.data(), count); },
                             [&] {
                               std::memcpy(copy.data(), data.data(), count * 4);
                               asm volatile("" : : "r"(copy.data()) : "memory");  // keep the copy
                             }});
      const double ours = m[0], raw = m[1], memcpy_s = m[2];
      const double gb = static_cast<double>(count * 4) / 1e9;
      const double factor = 2.0 * (n - 1) / n;
      Print("  %12zu %12zu | %10.1f %8.3f %8.3f | %10.1f %8.3f %8.3f | %6.3f | %8.3f\n", count * 4,
            count, ours * 1e6, gb / ours, gb / ours * factor, raw * 1e6, gb / raw,
            gb / raw * factor, (gb / ours) / (gb / raw), gb / memcpy_s);
      if (bytes == o_.max_bytes) {
        Print("RESULT sweep_large_busbw_ratio=%.3f bytes=%zu ours_busbw=%.3f gloo_busbw=%.3f\n",
              raw / ours, count * 4, gb / ours * factor, gb / raw * factor);
      }
    }
  }

  void Algos() {
    const int n = rt_.size();
    Print("# algos: data path only on the raw context, float32 sum, %d ranks; time in us\n", n);
    Print("# %12s | %10s | %10s %6s | %10s %6s\n", "bytes", "gloo_us", "ring_us", "ratio",
          "direct_us", "ratio");
    const ReduceFn sum = GetReduceFn(DataType::kFloat32, ReduceOp::kSum);
    std::vector<std::byte> scratch, direct_scratch;
    uint64_t slot = uint64_t{0x11} << 56;
    for (int64_t bytes = o_.min_bytes; bytes <= o_.max_bytes; bytes *= 2) {
      const size_t count = static_cast<size_t>(std::max<int64_t>(bytes / 4, 1));
      std::vector<float> data(count, 1.0f);
      const int iters = static_cast<int>(std::clamp<int64_t>((int64_t{32} << 20) / bytes, 2, 200));
      auto check = [](const Status& s) {
        if (!s.ok()) throw std::runtime_error(s.ToString());
      };
      auto ring = [&] {
        std::vector<Backend::Span> spans{{data.data(), count}};
        check(gloo_ops::RingAllreduceSpans(raw_, spans, 4, sum, slot, &scratch));
        slot += 2 * static_cast<uint64_t>(n);
      };
      auto direct = [&] {
        check(gloo_ops::DirectAllreduce(raw_, data.data(), data.data(), count, 4, sum, slot++,
                                        &direct_scratch));
      };
      auto gloo = [&] { RawAllreduce(data.data(), count); };
      auto [ring_t, gloo_a] = Compare(iters, ring, gloo);
      auto [direct_t, gloo_b] = Compare(iters, direct, gloo);
      const double g = (gloo_a + gloo_b) / 2;
      Print("  %12zu | %10.1f | %10.1f %6.3f | %10.1f %6.3f\n", count * 4, g * 1e6, ring_t * 1e6,
            gloo_a / ring_t, direct_t * 1e6, gloo_b / direct_t);
    }
  }

  // gloo (flat) against shm on the same sizes, alternating blocks.
  void Backends(Backend& flat, Backend& shm) {
    const int n = rt_.size();
    Print("# backends: float32 sum allreduce, %d ranks, %d hosts, data plane only; shm %s\n", n,
          rt_.cross_size(), MapsSegment() ? "through shared memory" : "fell back to gloo");
    Print("# %12s | %10s %8s | %10s %8s | %7s\n", "bytes", "gloo_us", "busbw", "shm_us", "busbw",
          "speedup");
    auto run = [](Backend& b, float* data, size_t count) {
      if (Status s = b.Allreduce(data, data, count, DataType::kFloat32, ReduceOp::kSum); !s.ok())
        throw std::runtime_error(s.ToString());
    };
    for (int64_t bytes = o_.min_bytes; bytes <= o_.max_bytes; bytes *= 2) {
      const size_t count = static_cast<size_t>(std::max<int64_t>(bytes / 4, 1));
      std::vector<float> data(count, 1.0f);
      const int iters = static_cast<int>(std::clamp<int64_t>((int64_t{32} << 20) / bytes, 2, 200));
      auto [flat_t, shm_t] = Compare(
          iters, [&] { run(flat, data.data(), count); }, [&] { run(shm, data.data(), count); });
      const double gb = static_cast<double>(count * 4) / 1e9, factor = 2.0 * (n - 1) / n;
      Print("  %12zu | %10.1f %8.3f | %10.1f %8.3f | %7.3f\n", count * 4, flat_t * 1e6,
            gb / flat_t * factor, shm_t * 1e6, gb / shm_t * factor, flat_t / shm_t);
      Print("RESULT backends bytes=%zu gloo_us=%.1f shm_us=%.1f speedup=%.3f\n", count * 4,
            flat_t * 1e6, shm_t * 1e6, flat_t / shm_t);
    }
  }

  // Whether this process maps a khorovod shared-memory segment.
  static bool MapsSegment() {
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) {
      if (line.find("/dev/shm/khorovod-") != std::string::npos) return true;
    }
    return false;
  }

  void Resnet() {
    auto shapes = bench::ResNet50ParameterShapes();
    std::vector<std::vector<float>> grads;
    size_t total = 0;
    for (auto& s : shapes) {
      int64_t n = 1;
      for (int64_t d : s.shape) n *= d;
      grads.emplace_back(static_cast<size_t>(n), 1.0f);
      total += static_cast<size_t>(n);
    }
    std::vector<float> flat(total, 1.0f);
    auto fused_step = [&] {
      std::vector<Handle> handles;
      for (size_t i = 0; i < shapes.size(); ++i) {
        TensorView v{grads[i].data(), DataType::kFloat32, shapes[i].shape, {}};
        handles.push_back(rt_.allreduce_async(shapes[i].name, v, v, {ReduceOp::kSum}));
      }
      for (auto& h : handles) {
        if (Status s = h.wait(); !s.ok()) throw std::runtime_error(s.ToString());
      }
    };
    auto [fused, single] =
        Compare(o_.resnet_steps, fused_step, [&] { Ours("flat", flat.data(), total); });
    auto [single_again, raw] = Compare(
        o_.resnet_steps, [&] { Ours("flat", flat.data(), total); },
        [&] { RawAllreduce(flat.data(), total); });
    Print("# resnet50: %zu tensors, %.1f MiB float32, %d ranks\n", shapes.size(),
          static_cast<double>(total * 4) / (1 << 20), rt_.size());
    Print("  fused step %.1f ms | single allreduce %.1f ms | raw gloo %.1f ms\n", fused * 1e3,
          single * 1e3, raw * 1e3);
    Print("RESULT resnet_fused_over_single=%.3f tensors=%zu bytes=%zu single_over_gloo=%.3f\n",
          fused / single, shapes.size(), total * 4, single_again / raw);
  }

  void Latency() {
    float x = 1.0f;
    auto [ours, raw] = Compare(
        o_.latency_iters, [&] { Ours("tiny", &x, 1); }, [&] { RawAllreduce(&x, 1); });
    Print("# latency: 4-byte allreduce, %d ranks\n", rt_.size());
    Print("  khorovod %.1f us | raw gloo ring %.1f us\n", ours * 1e6, raw * 1e6);
    Print("RESULT latency_overhead_us=%.1f ours_us=%.1f gloo_us=%.1f\n", (ours - raw) * 1e6,
          ours * 1e6, raw * 1e6);
  }

 private:
  template <typename... Args>
  void Print(const char* fmt, Args... args) {
    if (rt_.rank() != 0) return;
    std::printf(fmt, args...);
    std::fflush(stdout);
  }

  Runtime& rt_;
  std::shared_ptr<gloo::Context> raw_;
  Options o_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"khorovod allreduce benchmark (run under khorovodrun)"};
  Options o;
  app.add_option("--mode", o.mode, "sweep, resnet, latency, algos, backends or all")
      ->check(CLI::IsMember({"sweep", "resnet", "latency", "algos", "backends", "all"}));
  app.add_option("--min-bytes", o.min_bytes)->check(CLI::PositiveNumber);
  app.add_option("--max-bytes", o.max_bytes)->check(CLI::PositiveNumber);
  app.add_option("--reps", o.reps, "alternating blocks per measurement")
      ->check(CLI::PositiveNumber);
  app.add_option("--latency-iters", o.latency_iters)->check(CLI::PositiveNumber);
  app.add_option("--resnet-steps", o.resnet_steps)->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  auto config = Config::FromEnvironment();
  if (!config.ok()) {
    std::fprintf(stderr, "bench: %s\n", config.status().ToString().c_str());
    return 2;
  }
  Runtime rt;
  if (Status s = rt.init(*config); !s.ok()) {
    std::fprintf(stderr, "bench: init: %s\n", s.ToString().c_str());
    return 2;
  }
  auto raw = ConnectGlooContext(*config, "raw-gloo-baseline");
  if (!raw.ok()) {
    std::fprintf(stderr, "bench: raw gloo: %s\n", raw.status().ToString().c_str());
    return 2;
  }
  try {
    Bench b(rt, *raw, o);
    if (o.mode == "latency" || o.mode == "all") b.Latency();
    if (o.mode == "resnet" || o.mode == "all") b.Resnet();
    if (o.mode == "sweep" || o.mode == "all") b.Sweep();
    if (o.mode == "algos") b.Algos();
    if (o.mode == "backends") {
      // One Gloo context per backend, like the runtime's own data plane.
      auto flat_ctx = ConnectGlooContext(*config, "bench-backend-gloo");
      auto shm_ctx = ConnectGlooContext(*config, "bench-backend-shm");
      if (!flat_ctx.ok() || !shm_ctx.ok())
        throw std::runtime_error("bench: backend contexts did not connect");
      auto flat = BackendRegistry::Create("gloo", BackendInit{&*config, *flat_ctx});
      auto shm = BackendRegistry::Create("shm", BackendInit{&*config, *shm_ctx});
      if (!flat.ok()) throw std::runtime_error(flat.status().ToString());
      if (!shm.ok()) throw std::runtime_error(shm.status().ToString());
      b.Backends(**flat, **shm);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench: %s\n", e.what());
    return 1;
  }
  return rt.shutdown().ok() ? 0 : 1;
}
