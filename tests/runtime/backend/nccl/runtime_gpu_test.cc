// The runtime's device path on real GPUs: Runtime calls with CUDA tensors
// through the NCCL backend and through host staging, results in device
// memory. Skipped (with the reason) where there is no NVIDIA driver; the
// parent never initializes CUDA, because CUDA does not survive fork, so the
// checks look for the driver's device nodes instead.
//
// The one-GPU tests ran on an H200 on 2026-11-26; the two-GPU one has not run (docs/gpu.md).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "multiproc.h"

namespace khorovod {
namespace {

using testing::RankContext;
using testing::RankOptions;

bool GpuNodes(int n, std::string* why) {
  for (int i = 0; i < n; ++i) {
    if (access(("/dev/nvidia" + std::to_string(i)).c_str(), F_OK) != 0) {
      *why =
          "needs " + std::to_string(n) + " GPU(s) (/dev/nvidia" + std::to_string(i) + " missing)";
      return false;
    }
  }
  return true;
}

// float32 device memory; freed on scope exit.
class DeviceFloats {
 public:
  explicit DeviceFloats(const std::vector<float>& host) : n_(host.size()) {
    EXPECT_EQ(cudaMalloc(&p_, std::max<size_t>(n_ * 4, 4)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p_, host.data(), n_ * 4, cudaMemcpyHostToDevice), cudaSuccess);
    // Ready before submission: the runtime's stream does not wait for the
    // legacy default stream, and a pageable cudaMemcpy may return early.
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  // Owns its memory: moved, never copied (a copy in a growing vector would
  // free the memory the runtime is still given).
  DeviceFloats(DeviceFloats&& other) noexcept
      : p_(std::exchange(other.p_, nullptr)), n_(other.n_) {}
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  DeviceFloats& operator=(DeviceFloats&&) = delete;
  ~DeviceFloats() {
    if (p_) (void)cudaFree(p_);
  }
  TensorView view(int device) const {
    return TensorView{
        p_, DataType::kFloat32, {static_cast<int64_t>(n_)}, Device{DeviceKind::kCUDA, device}};
  }
  std::vector<float> Download() const { return DownloadFrom(p_, n_); }
  static std::vector<float> DownloadFrom(const void* p, size_t n) {
    std::vector<float> out(n);
    EXPECT_EQ(cudaMemcpy(out.data(), p, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }

 private:
  void* p_ = nullptr;
  size_t n_;
};

bool IsDevicePointer(const void* p) {
  cudaPointerAttributes a{};
  return cudaPointerGetAttributes(&a, p) == cudaSuccess && a.type == cudaMemoryTypeDevice;
}

// Every collective through the Runtime on CUDA tensors of `device`.
void EveryCollective(Runtime& rt, const RankContext& ctx, int device) {
  const float n = static_cast<float>(ctx.size);
  const float r = static_cast<float>(ctx.rank + 1);
  // Fused: two small, one large (in place), scaled: sum * 0.5 * 4.
  std::vector<DeviceFloats> ts;
  for (size_t len : {size_t{3}, size_t{1000}, size_t{50000}})
    ts.emplace_back(std::vector<float>(len, r));
  std::vector<Handle> hs;
  for (size_t i = 0; i < ts.size(); ++i) {
    hs.push_back(rt.allreduce_async("ar." + std::to_string(i), ts[i].view(device),
                                    ts[i].view(device), {ReduceOp::kSum, 0.5, 4.0}));
  }
  const float sum = n * (n + 1) / 2;
  for (size_t i = 0; i < ts.size(); ++i) {
    ASSERT_TRUE(hs[i].wait().ok()) << hs[i].wait();
    for (float v : ts[i].Download()) ASSERT_EQ(v, 2 * sum) << "tensor " << i;
  }
  // Average, out of place.
  DeviceFloats in(std::vector<float>(17, r)), out(std::vector<float>(17, -1));
  ASSERT_TRUE(rt.allreduce("avg", in.view(device), out.view(device), {ReduceOp::kAverage}).ok());
  for (float v : out.Download()) ASSERT_FLOAT_EQ(v, sum / n);
  // Allgather and reducescatter results stay on the device.
  Tensor gathered;
  ASSERT_TRUE(rt.allgather("ag", in.view(device), &gathered).ok());
  ASSERT_EQ(gathered.device, (Device{DeviceKind::kCUDA, device}));
  ASSERT_TRUE(IsDevicePointer(gathered.data()));
  auto g =
      DeviceFloats::DownloadFrom(gathered.data(), static_cast<size_t>(gathered.num_elements()));
  for (int k = 0; k < ctx.size; ++k)
    ASSERT_EQ(g[static_cast<size_t>(k) * 17], static_cast<float>(k + 1));
  DeviceFloats rs(std::vector<float>(static_cast<size_t>(ctx.size) * 2, r));
  TensorView rsv = rs.view(device);
  rsv.shape = {ctx.size, 2};
  Tensor mine;
  ASSERT_TRUE(rt.reducescatter("rs", rsv, &mine, {ReduceOp::kSum}).ok());
  ASSERT_TRUE(IsDevicePointer(mine.data()));
  for (float v : DeviceFloats::DownloadFrom(mine.data(), 2)) ASSERT_EQ(v, sum);
  Tensor a2a;
  ASSERT_TRUE(rt.alltoall("a2a", rsv, &a2a).ok());
  ASSERT_TRUE(IsDevicePointer(a2a.data()));
  auto a = DeviceFloats::DownloadFrom(a2a.data(), static_cast<size_t>(a2a.num_elements()));
  for (int k = 0; k < ctx.size; ++k)
    ASSERT_EQ(a[static_cast<size_t>(k) * 2], static_cast<float>(k + 1));
  DeviceFloats b(std::vector<float>(9, r));
  ASSERT_TRUE(rt.broadcast("bc", b.view(device), {ctx.size - 1}).ok());
  for (float v : b.Download()) ASSERT_EQ(v, n);
  ASSERT_TRUE(rt.barrier().ok());
}

TEST(RuntimeGpu, NcclOneRankEveryCollective) {
  std::string why;
  if (!GpuNodes(1, &why)) GTEST_SKIP() << why;
  RankOptions opts;
  opts.deadline = std::chrono::seconds(120);
  opts.env = {{"KHOROVOD_GPU_OPERATIONS", "nccl"}};
  KH_RUN_RANKS(
      1,
      [](Runtime& rt, const RankContext& ctx) {
        EveryCollective(rt, ctx, 0);
        // A scaling NCCL cannot fold into one factor fails that operation only.
        DeviceFloats t(std::vector<float>(4, 1));
        Status s = rt.allreduce("max.scaled", t.view(0), t.view(0), {ReduceOp::kMax, 2.0, 1.0});
        EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
        ASSERT_TRUE(rt.allreduce("after", t.view(0), t.view(0), {ReduceOp::kSum}).ok());
      },
      opts);
}

TEST(RuntimeGpu, StagingThreeProcessesShareOneGpu) {
  std::string why;
  if (!GpuNodes(1, &why)) GTEST_SKIP() << why;
  RankOptions opts;
  opts.deadline = std::chrono::seconds(120);
  opts.env = {{"KHOROVOD_GPU_OPERATIONS", "staging"}, {"KHOROVOD_GPU_DEVICE", "0"}};
  KH_RUN_RANKS(
      3, [](Runtime& rt, const RankContext& ctx) { EveryCollective(rt, ctx, 0); }, opts);
}

// n ranks, one GPU each where there are n, else all on GPU 0 through
// KHOROVOD_GPU_SHARE=1; then again in a new session (a new communicator, as
// after shutdown() and init()).
class RuntimeNcclRanks : public ::testing::TestWithParam<int> {};

TEST_P(RuntimeNcclRanks, EveryCollectiveAndANewSession) {
  const int n = GetParam();
  std::string why;
  if (!GpuNodes(1, &why)) GTEST_SKIP() << why;
  RankOptions opts;
  opts.deadline = std::chrono::seconds(180);
  opts.env = {{"KHOROVOD_GPU_OPERATIONS", "nccl"}};
  const bool share = !GpuNodes(n, &why);
  if (share) opts.env.insert({{"KHOROVOD_GPU_SHARE", "1"}, {"KHOROVOD_GPU_DEVICE", "0"}});
  KH_RUN_RANKS(
      n,
      [share](Runtime& rt, const RankContext& ctx) {
        const int device = share ? 0 : ctx.rank;
        EveryCollective(rt, ctx, device);
        ASSERT_TRUE(rt.shutdown().ok());
        Config next = ctx.config;
        next.job_id += "-2";
        ASSERT_TRUE(rt.init(next).ok());
        EveryCollective(rt, ctx, device);
      },
      opts);
}

INSTANTIATE_TEST_SUITE_P(Sizes, RuntimeNcclRanks, ::testing::Values(2, 4),
                         [](const auto& info) { return "ranks" + std::to_string(info.param); });

// op=Adasum on CUDA tensors (core/device_adasum.h), 4 ranks on one GPU
// placed as 2 simulated hosts x 2, through NCCL and through staging:
// Horovod's NCCL result, Adasum across hosts of the host sums divided by
// the ranks per host. The vectors have disjoint supports, so every partial
// sum is orthogonal to the others and Adasum adds them: rank r's (r + 1) at
// index r and -2 (r + 1) at r + 4 come back as (r + 1) / 2 and -(r + 1).
class RuntimeGpuAdasum : public ::testing::TestWithParam<std::string> {};

TEST_P(RuntimeGpuAdasum, TwoHostsOfTwoRanksOnOneGpu) {
  std::string why;
  if (!GpuNodes(1, &why)) GTEST_SKIP() << why;
  RankOptions opts;
  opts.deadline = std::chrono::seconds(120);
  opts.env = {{"KHOROVOD_GPU_OPERATIONS", GetParam()},
              {"KHOROVOD_GPU_SHARE", "1"},
              {"KHOROVOD_GPU_DEVICE", "0"}};
  opts.rank_env = [](int r, std::map<std::string, std::string>& env) {
    env["KHOROVOD_LOCAL_RANK"] = std::to_string(r % 2);
    env["KHOROVOD_LOCAL_SIZE"] = "2";
    env["KHOROVOD_CROSS_RANK"] = std::to_string(r / 2);
    env["KHOROVOD_CROSS_SIZE"] = "2";
  };
  KH_RUN_RANKS(
      4,
      [](Runtime& rt, const RankContext& ctx) {
        std::vector<float> mine(8, 0.0f);
        mine[static_cast<size_t>(ctx.rank)] = static_cast<float>(ctx.rank + 1);
        mine[static_cast<size_t>(ctx.rank) + 4] = -2.0f * static_cast<float>(ctx.rank + 1);
        DeviceFloats in(mine), out(std::vector<float>(8, -1.0f));
        ASSERT_TRUE(rt.allreduce("adasum", in.view(0), out.view(0), {ReduceOp::kAdasum}).ok());
        const std::vector<float> got = out.Download();
        for (int k = 0; k < 4; ++k) {
          EXPECT_FLOAT_EQ(got[static_cast<size_t>(k)], (k + 1) / 2.0f) << k;
          EXPECT_FLOAT_EQ(got[static_cast<size_t>(k) + 4], -(k + 1.0f)) << k;
        }
        // The device backend is still usable after the host round trip.
        ASSERT_TRUE(rt.allreduce("after", out.view(0), out.view(0), {ReduceOp::kSum}).ok());
      },
      opts);
}

INSTANTIATE_TEST_SUITE_P(Backends, RuntimeGpuAdasum, ::testing::Values("nccl", "staging"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace khorovod
