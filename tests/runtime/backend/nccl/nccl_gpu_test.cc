// GPU tests of the NCCL backend and the host-staging backend on real device
// memory. Each test skips (GTEST_SKIP with the reason) when no GPU or
// driver is usable. ctest runs every test in its own process, so the
// multi-process test can check for a GPU without initializing CUDA in the
// parent before it forks (CUDA does not survive fork).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "backend/gloo/gloo_ops.h"
#include "backend/nccl/nccl_backend.h"
#include "backend/registry.h"
#include "bootstrap/gloo_bootstrap.h"
#include "multiproc.h"

namespace khorovod {
namespace {

// Skips the calling test when CUDA has no usable device here.
#define KH_REQUIRE_GPU()                                                                \
  do {                                                                                  \
    int kh_count_ = 0;                                                                  \
    cudaError_t kh_e_ = cudaGetDeviceCount(&kh_count_);                                 \
    if (kh_e_ != cudaSuccess || kh_count_ == 0) {                                       \
      GTEST_SKIP() << "no usable GPU: "                                                 \
                   << (kh_e_ == cudaSuccess ? "0 devices" : cudaGetErrorString(kh_e_)); \
    }                                                                                   \
  } while (0)

// Device memory holding a copy of `host` bytes; freed on scope exit.
class DeviceVec {
 public:
  explicit DeviceVec(size_t bytes) : bytes_(bytes) {
    EXPECT_EQ(cudaMalloc(&p_, std::max<size_t>(bytes, 1)), cudaSuccess);
  }
  ~DeviceVec() { (void)cudaFree(p_); }
  void* get() const { return p_; }
  // The backends run on their own non-blocking streams, which do not wait
  // for the legacy default stream: a cudaMemcpy from pageable memory may
  // return before its DMA lands, so the input is made ready before use, as
  // the backends' contract asks (docs/gpu.md).
  void Upload(const void* host) {
    ASSERT_EQ(cudaMemcpy(p_, host, bytes_, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  // cudaMemset is asynchronous on the legacy stream: also made ready here.
  void Fill(int byte) {
    ASSERT_EQ(cudaMemset(p_, byte, bytes_), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  std::vector<std::byte> Download() const {
    std::vector<std::byte> out(bytes_);
    EXPECT_EQ(cudaMemcpy(out.data(), p_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_;
};

std::unique_ptr<Backend> MakeSingleRankNccl() {
  Config config;  // size 1, device 0
  auto b = MakeNcclBackend(BackendInit{&config, nullptr});
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? std::move(*b) : nullptr;
}

// Bytes of `n` elements of `dtype` with small distinct values that every
// dtype represents exactly (0..63 as integers, or as floats).
std::vector<std::byte> Pattern(DataType dtype, size_t n, int seed, int mult = 1) {
  std::vector<std::byte> out(n * DataTypeSize(dtype));
  for (size_t i = 0; i < n; ++i) {
    const int v = static_cast<int>((i * 7 + static_cast<size_t>(seed)) % 64) * mult;
    std::byte* p = out.data() + i * DataTypeSize(dtype);
    switch (dtype) {
      case DataType::kFloat32: {
        float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
        break;
      }
      case DataType::kFloat64: {
        double d = v;
        std::memcpy(p, &d, 8);
        break;
      }
      case DataType::kFloat16: {  // small integers are exact in binary16
        uint16_t h = 0;
        if (v != 0) {
          int e = 31 - __builtin_clz(static_cast<unsigned>(v));
          h = static_cast<uint16_t>(((e + 15) << 10) |
                                    ((static_cast<unsigned>(v) << (10 - e)) & 0x3ff));
        }
        std::memcpy(p, &h, 2);
        break;
      }
      case DataType::kBFloat16: {
        float f = static_cast<float>(v);
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        uint16_t b = static_cast<uint16_t>(bits >> 16);
        std::memcpy(p, &b, 2);
        break;
      }
      case DataType::kInt8: {
        int8_t x = static_cast<int8_t>(v);
        std::memcpy(p, &x, 1);
        break;
      }
      case DataType::kUInt8: {
        uint8_t x = static_cast<uint8_t>(v);
        std::memcpy(p, &x, 1);
        break;
      }
      case DataType::kInt32: {
        int32_t x = v;
        std::memcpy(p, &x, 4);
        break;
      }
      case DataType::kInt64: {
        int64_t x = v;
        std::memcpy(p, &x, 8);
        break;
      }
      case DataType::kInt16: {
        int16_t x = static_cast<int16_t>(v);
        std::memcpy(p, &x, 2);
        break;
      }
      case DataType::kBool: {
        bool x = v != 0;
        std::memcpy(p, &x, 1);
        break;
      }
    }
  }
  return out;
}

// "" when equal, else where the first differing element is and both
// elements' bytes (gtest's dump of two byte vectors stops at 32 bytes).
std::string FirstDifference(const std::vector<std::byte>& got, const std::vector<std::byte>& want,
                            size_t esize) {
  if (got.size() != want.size())
    return "sizes " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    const size_t e = i / esize;
    std::string s =
        "element " + std::to_string(e) + " of " + std::to_string(got.size() / esize) + ": got";
    char hex[4];
    for (size_t b = 0; b < esize; ++b) {
      std::snprintf(hex, sizeof hex, " %02x", static_cast<unsigned>(got[e * esize + b]));
      s += hex;
    }
    s += ", want";
    for (size_t b = 0; b < esize; ++b) {
      std::snprintf(hex, sizeof hex, " %02x", static_cast<unsigned>(want[e * esize + b]));
      s += hex;
    }
    size_t bad = 0;
    for (size_t k = 0; k < got.size() / esize; ++k) {
      bad += std::memcmp(&got[k * esize], &want[k * esize], esize) != 0;
    }
    return s + " (" + std::to_string(bad) + " elements differ)";
  }
  return "";
}

TEST(NcclGpu, AllreduceEveryDtypeAndOp) {
  KH_REQUIRE_GPU();
  auto backend = MakeSingleRankNccl();
  ASSERT_TRUE(backend);
  EXPECT_TRUE(backend->AveragesNatively());
  EXPECT_TRUE(backend->SupportsDevice(Device{DeviceKind::kCUDA, 0}));
  const size_t n = 4099;  // not a multiple of any vector width
  for (DataType dtype : kAllDataTypes) {
    for (ReduceOp op :
         {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      // At world size 1 every reduction is the identity; out-of-place with a
      // poisoned output proves the bytes went through NCCL.
      auto input = Pattern(dtype, n, 3);
      DeviceVec in(input.size()), out(input.size());
      in.Upload(input.data());
      out.Fill(0xAB);
      Status s = backend->Allreduce(in.get(), out.get(), n, dtype, op);
      ASSERT_TRUE(s.ok()) << DataTypeName(dtype) << " " << ReduceOpName(op) << ": " << s;
      const auto got = out.Download();
      EXPECT_EQ(FirstDifference(got, input, DataTypeSize(dtype)), "")
          << DataTypeName(dtype) << " " << ReduceOpName(op);
    }
  }
}

TEST(NcclGpu, FusedSpansUnpackToTheirOwnBuffers) {
  KH_REQUIRE_GPU();
  auto backend = MakeSingleRankNccl();
  ASSERT_TRUE(backend);
  // Small spans (packed), a large one (in place), an empty one, in between.
  const std::vector<size_t> counts = {1, 3, 70000, 0, 17, 16383, 16384};
  std::vector<std::unique_ptr<DeviceVec>> bufs;
  std::vector<std::vector<std::byte>> expected;
  std::vector<Backend::Span> spans;
  for (size_t i = 0; i < counts.size(); ++i) {
    expected.push_back(Pattern(DataType::kFloat32, counts[i], static_cast<int>(i) * 11));
    bufs.push_back(std::make_unique<DeviceVec>(expected.back().size()));
    bufs.back()->Upload(expected.back().data());
    spans.push_back({bufs.back()->get(), counts[i]});
  }
  for (int round = 0; round < 3; ++round) {  // the fusion buffer is reused
    Status s = backend->AllreduceSpans(spans, DataType::kFloat32, ReduceOp::kSum);
    ASSERT_TRUE(s.ok()) << s;
    for (size_t i = 0; i < counts.size(); ++i)
      EXPECT_EQ(bufs[i]->Download(), expected[i]) << "span " << i;
  }
}

// Averages (out of place, through Allreduce) and scaled sums (in place,
// through DeviceOps::AllreduceScaled, factor 0.5 * 4) at world size 1 over
// counts around every vector width: all mismatches are listed at once.
TEST(NcclGpu, AveragedAndScaledEveryCount) {
  KH_REQUIRE_GPU();
  auto backend = MakeSingleRankNccl();
  ASSERT_TRUE(backend);
  DeviceOps* ops = backend->device_ops();
  ASSERT_NE(ops, nullptr);
  std::string failures;
  for (DataType dtype :
       {DataType::kFloat64, DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
        DataType::kInt32, DataType::kInt64, DataType::kUInt8}) {
    for (size_t n : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{8}, size_t{9}, size_t{4097},
                     size_t{4098}, size_t{4099}, size_t{65537}}) {
      const std::string what = std::string(DataTypeName(dtype)) + " n=" + std::to_string(n);
      auto input = Pattern(dtype, n, 5);
      DeviceVec in(input.size()), out(input.size());
      in.Upload(input.data());
      out.Fill(0xAB);
      Status s = backend->Allreduce(in.get(), out.get(), n, dtype, ReduceOp::kAverage);
      if (!s.ok())
        failures += what + " average: " + s.ToString() + "\n";
      else if (auto d = FirstDifference(out.Download(), input, DataTypeSize(dtype)); !d.empty()) {
        failures += what + " average: " + d + "\n";
      }
      s = ops->AllreduceScaled({Backend::Span{in.get(), n}}, dtype, ReduceOp::kSum, 0.5, 4.0);
      if (s.ok()) s = ops->Flush();
      if (!s.ok())
        failures += what + " scaled sum: " + s.ToString() + "\n";
      else if (auto d =
                   FirstDifference(in.Download(), Pattern(dtype, n, 5, 2), DataTypeSize(dtype));
               !d.empty()) {
        failures += what + " scaled sum: " + d + "\n";
      }
    }
  }
  EXPECT_EQ(failures, "");
}

TEST(NcclGpu, OtherCollectivesAtWorldSizeOne) {
  KH_REQUIRE_GPU();
  auto backend = MakeSingleRankNccl();
  ASSERT_TRUE(backend);
  auto input = Pattern(DataType::kInt32, 100, 5);
  DeviceVec in(input.size()), out(input.size());
  in.Upload(input.data());
  ASSERT_TRUE(backend->Allgatherv(in.get(), out.get(), {100}, DataType::kInt32).ok());
  EXPECT_EQ(out.Download(), input);
  out.Fill(0);
  ASSERT_TRUE(backend->Alltoallv(in.get(), {100}, out.get(), {100}, DataType::kInt32).ok());
  EXPECT_EQ(out.Download(), input);
  ASSERT_TRUE(backend->Broadcast(in.get(), 100, DataType::kInt32, 0).ok());
  EXPECT_EQ(in.Download(), input);
  ASSERT_TRUE(backend->Barrier().ok());
}

// Every cycle forms a communicator, runs a collective, and destroys the
// backend, which aborts the communicator. Device memory must come back.
TEST(NcclGpu, AbortAndReinitDoesNotLeak) {
  KH_REQUIRE_GPU();
  constexpr int kCycles = 100;
  DeviceVec buf(1 << 20);
  auto cycle = [&] {
    auto backend = MakeSingleRankNccl();
    ASSERT_TRUE(backend);
    ASSERT_TRUE(
        backend->Allreduce(buf.get(), buf.get(), (1 << 20) / 4, DataType::kFloat32, ReduceOp::kSum)
            .ok());
  };
  cycle();  // warm up: CUDA and NCCL allocate some state once per process
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  size_t free_before = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  for (int i = 0; i < kCycles; ++i) {
    cycle();
    if (::testing::Test::HasFatalFailure()) return;
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  // A leak of even one fusion buffer or NCCL's per-communicator buffers
  // (several MiB each) over 100 cycles would exceed this slack.
  const size_t slack = 32u << 20;
  EXPECT_LE(free_before, free_after + slack)
      << "free device memory fell from " << free_before << " to " << free_after << " over "
      << kCycles << " abort/re-init cycles";
}

// Three processes on one GPU: NCCL refuses that, the staging backend does it.
TEST(StagingGpu, ProcessesShareOneGpu) {
  // Do not touch CUDA before forking: look for the driver's device node.
  if (access("/dev/nvidiactl", F_OK) != 0)
    GTEST_SKIP() << "no NVIDIA driver (/dev/nvidiactl missing)";
  testing::RankOptions opts;
  opts.init = false;
  opts.deadline = std::chrono::seconds(120);
  opts.env = {{"KHOROVOD_GPU_DEVICE", "0"}};
  KH_RUN_RANKS(
      3,
      [](Runtime&, const testing::RankContext& ctx) {
        int count = 0;
        ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
        ASSERT_GT(count, 0);
        auto gloo = ConnectGlooContext(ctx.config);
        ASSERT_TRUE(gloo.ok()) << gloo.status();
        auto b = BackendRegistry::Create("staging", BackendInit{&ctx.config, *gloo});
        ASSERT_TRUE(b.ok()) << b.status();
        std::vector<float> host(5000, static_cast<float>(ctx.rank + 1));
        DeviceVec dev(host.size() * 4);
        dev.Upload(host.data());
        ASSERT_TRUE(
            (*b)->Allreduce(dev.get(), dev.get(), host.size(), DataType::kFloat32, ReduceOp::kSum)
                .ok());
        auto bytes = dev.Download();
        std::vector<float> got(host.size());
        std::memcpy(got.data(), bytes.data(), bytes.size());
        EXPECT_EQ(got, std::vector<float>(host.size(), 6.0f));
      },
      opts);
}

// Placement for an n-rank NCCL test, decided without initializing CUDA
// before the fork: one GPU per rank where the driver exposes n device
// nodes, else all ranks on GPU 0 with KHOROVOD_GPU_SHARE=1 (NCCL then runs
// them as separate nodes over loopback, or with NCCL_MULTI_RANK_GPU_ENABLE
// on NCCL >= 2.30: backend/nccl/nccl_formation.h).
bool PlaceRanks(int n, testing::RankOptions* opts, std::string* why) {
  if (access("/dev/nvidiactl", F_OK) != 0) {
    *why = "no NVIDIA driver (/dev/nvidiactl missing)";
    return false;
  }
  for (int i = 0; i < n; ++i) {
    if (access(("/dev/nvidia" + std::to_string(i)).c_str(), F_OK) != 0) {
      opts->env["KHOROVOD_GPU_SHARE"] = "1";
      opts->env["KHOROVOD_GPU_DEVICE"] = "0";
      return true;
    }
  }
  return true;
}

std::unique_ptr<Backend> MakeRankNccl(const testing::RankContext& ctx,
                                      std::shared_ptr<gloo::Context>* keep = nullptr,
                                      std::shared_ptr<BackendLegacy> legacy = nullptr) {
  auto gloo = ConnectGlooContext(ctx.config);
  EXPECT_TRUE(gloo.ok()) << gloo.status();
  if (!gloo.ok()) return nullptr;
  if (keep) *keep = *gloo;
  auto b = MakeNcclBackend(BackendInit{&ctx.config, *gloo, std::move(legacy)});
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? std::move(*b) : nullptr;
}

std::vector<int32_t> Ints(const DeviceVec& d, size_t n) {
  auto bytes = d.Download();
  std::vector<int32_t> out(n);
  std::memcpy(out.data(), bytes.data(), n * 4);
  return out;
}

class NcclRanks : public ::testing::TestWithParam<int> {};

TEST_P(NcclRanks, EveryCollective) {
  const int n = GetParam();
  testing::RankOptions opts;
  std::string why;
  if (!PlaceRanks(n, &opts, &why)) GTEST_SKIP() << why;
  opts.init = false;
  opts.deadline = std::chrono::seconds(120);
  KH_RUN_RANKS(
      n,
      [n](Runtime&, const testing::RankContext& ctx) {
        auto b = MakeRankNccl(ctx);
        ASSERT_TRUE(b);
        const int r = ctx.rank;
        // Allreduce: a large buffer (NCCL's ring, not its one-rank copy) of r+1.
        const size_t count = 1 << 20;
        std::vector<int32_t> v(count, r + 1);
        DeviceVec dv(v.size() * 4);
        dv.Upload(v.data());
        ASSERT_TRUE(
            b->Allreduce(dv.get(), dv.get(), v.size(), DataType::kInt32, ReduceOp::kSum).ok());
        EXPECT_EQ(Ints(dv, count), std::vector<int32_t>(count, n * (n + 1) / 2));
        // Average of floats through ncclAvg.
        std::vector<float> f(4099, static_cast<float>(2 * r));
        DeviceVec df(f.size() * 4);
        df.Upload(f.data());
        ASSERT_TRUE(
            b->Allreduce(df.get(), df.get(), f.size(), DataType::kFloat32, ReduceOp::kAverage)
                .ok());
        auto fb = df.Download();
        std::vector<float> favg(f.size());
        std::memcpy(favg.data(), fb.data(), fb.size());
        EXPECT_EQ(favg, std::vector<float>(f.size(), static_cast<float>(n - 1)));
        // Unequal allgather shares: rank k sends k+1 values of k.
        std::vector<size_t> counts;
        std::vector<int32_t> want;
        for (int k = 0; k < n; ++k) {
          counts.push_back(k + 1);
          want.insert(want.end(), k + 1, k);
        }
        std::vector<int32_t> mine(r + 1, r);
        DeviceVec in(mine.size() * 4), out(want.size() * 4);
        in.Upload(mine.data());
        ASSERT_TRUE(b->Allgatherv(in.get(), out.get(), counts, DataType::kInt32).ok());
        EXPECT_EQ(Ints(out, want.size()), want);
        // Alltoall: rank s sends (10*s + d) to rank d, one value each.
        std::vector<int32_t> send, expect;
        for (int d = 0; d < n; ++d) {
          send.push_back(10 * r + d);
          expect.push_back(10 * d + r);
        }
        DeviceVec sd(n * 4), rd(n * 4);
        sd.Upload(send.data());
        std::vector<int64_t> ones(n, 1);
        ASSERT_TRUE(b->Alltoallv(sd.get(), ones, rd.get(), ones, DataType::kInt32).ok());
        EXPECT_EQ(Ints(rd, n), expect);
        // Broadcast from the last rank.
        std::vector<int32_t> bc(77, r == n - 1 ? 42 : -1);
        DeviceVec dbc(bc.size() * 4);
        dbc.Upload(bc.data());
        ASSERT_TRUE(b->Broadcast(dbc.get(), bc.size(), DataType::kInt32, n - 1).ok());
        EXPECT_EQ(Ints(dbc, bc.size()), std::vector<int32_t>(bc.size(), 42));
        ASSERT_TRUE(b->Barrier().ok());
      },
      opts);
}

// A peer that dies after forming the communicator must not hang the
// survivors: their next collective fails with UNAVAILABLE within the timeout.
TEST_P(NcclRanks, DeadPeerFailsWithinTimeout) {
  const int n = GetParam();
  testing::RankOptions opts;
  std::string why;
  if (!PlaceRanks(n, &opts, &why)) GTEST_SKIP() << why;
  opts.init = false;
  opts.deadline = std::chrono::seconds(120);
  opts.expect_killed = {n - 1};
  opts.env["KHOROVOD_TIMEOUT_SECONDS"] = "5";
  KH_RUN_RANKS(
      n,
      [n](Runtime&, const testing::RankContext& ctx) {
        auto b = MakeRankNccl(ctx);
        ASSERT_TRUE(b);
        DeviceVec buf(4096);
        ASSERT_TRUE(b->Barrier().ok());
        if (ctx.rank == n - 1) raise(SIGKILL);
        const auto start = std::chrono::steady_clock::now();
        Status s = b->Allreduce(buf.get(), buf.get(), 1024, DataType::kFloat32, ReduceOp::kSum);
        const auto waited = std::chrono::steady_clock::now() - start;
        EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
        EXPECT_LT(waited, std::chrono::seconds(20));
        // The backend stays broken and says so at once.
        EXPECT_EQ(b->Barrier().code(), StatusCode::kUnavailable);
      },
      opts);
}

// Re-formation 100 times at n ranks, alternating a new communicator (no
// legacy: ncclCommInitRankConfig) and the retired one (reuse): device
// memory must come back to its baseline.
TEST_P(NcclRanks, HundredReformationsKeepDeviceMemory) {
  const int n = GetParam();
  testing::RankOptions opts;
  std::string why;
  if (!PlaceRanks(n, &opts, &why)) GTEST_SKIP() << why;
  opts.init = false;
  opts.deadline = std::chrono::seconds(280);
  KH_RUN_RANKS(
      n,
      [](Runtime&, const testing::RankContext& ctx) {
        std::shared_ptr<gloo::Context> gloo;
        auto b = MakeRankNccl(ctx, &gloo);
        ASSERT_TRUE(b);
        DeviceVec buf(1 << 20);
        ASSERT_TRUE(
            b->Allreduce(buf.get(), buf.get(), (1 << 20) / 4, DataType::kFloat32, ReduceOp::kSum)
                .ok());
        ASSERT_TRUE(b->Barrier().ok());
        b.reset();
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        size_t free_before = 0, total = 0;
        ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
        std::shared_ptr<BackendLegacy> legacy;
        for (int i = 0; i < 100; ++i) {
          auto made =
              MakeNcclBackend(BackendInit{&ctx.config, gloo, i % 2 ? std::move(legacy) : nullptr});
          ASSERT_TRUE(made.ok()) << "cycle " << i << ": " << made.status();
          legacy.reset();
          ASSERT_TRUE((*made)
                          ->Allreduce(buf.get(), buf.get(), (1 << 20) / 4, DataType::kFloat32,
                                      ReduceOp::kSum)
                          .ok());
          ASSERT_TRUE((*made)->Barrier().ok());
          legacy = (*made)->Retire();
          ASSERT_NE(legacy, nullptr) << "a healthy communicator is retired for the next session";
        }
        legacy.reset();
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        // Both ranks' memory is on this GPU when they share it: measured after
        // both are done (a Gloo barrier).
        ASSERT_TRUE(gloo_ops::Barrier(gloo).ok());
        size_t free_after = 0;
        ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
        const size_t slack = 64u << 20;
        std::printf("reform-memory: rank %d free before %zu after %zu (MiB: %zu -> %zu)\n",
                    ctx.rank, free_before, free_after, free_before >> 20, free_after >> 20);
        EXPECT_LE(free_before, free_after + slack) << "device memory fell over 100 re-formations";
      },
      opts);
}

INSTANTIATE_TEST_SUITE_P(Sizes, NcclRanks, ::testing::Values(2, 4),
                         [](const auto& info) { return "ranks" + std::to_string(info.param); });

// Two ranks that land on one GPU without KHOROVOD_GPU_SHARE get a clear
// error naming them, before NCCL is asked.
TEST(NcclGpu, SharedGpuIsRefusedWithoutOptIn) {
  if (access("/dev/nvidiactl", F_OK) != 0)
    GTEST_SKIP() << "no NVIDIA driver (/dev/nvidiactl missing)";
  testing::RankOptions opts;
  opts.init = false;
  opts.deadline = std::chrono::seconds(60);
  opts.env = {{"KHOROVOD_GPU_DEVICE", "0"}};
  KH_RUN_RANKS(
      2,
      [](Runtime&, const testing::RankContext& ctx) {
        auto gloo = ConnectGlooContext(ctx.config);
        ASSERT_TRUE(gloo.ok()) << gloo.status();
        auto b = MakeNcclBackend(BackendInit{&ctx.config, *gloo});
        ASSERT_FALSE(b.ok());
        EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition);
        EXPECT_NE(b.status().message().find("ranks 0 and 1 both use GPU"), std::string::npos)
            << b.status();
        EXPECT_NE(b.status().message().find("KHOROVOD_GPU_SHARE=1"), std::string::npos)
            << b.status();
      },
      opts);
}

}  // namespace
}  // namespace khorovod
