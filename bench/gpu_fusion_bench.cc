// GPU benchmark of the NCCL backend's data path, on one GPU:
//
//   khorovod-bench-gpu-fusion [--reps N] [--iters N]
//
//   pack/unpack: the 161 ResNet-50 float32 gradients copied one by one
//     (cudaMemcpyAsync device-to-device) into one fusion buffer and back, against one plain
//     device-to-device copy of the same total bytes. Both report GB/s of
//     bytes moved; the target is pack >= 0.8x the plain copy.
//   allreduce: the fused ResNet-50 step through the NCCL backend at world
//     size 1, laid out as the executor's device path does (core/fusion.h:
//     small gradients packed, large ones in place), packed and unpacked with
//     the backend's DeviceOps; float32, average; milliseconds per step.
// Copies are timed with CUDA events on one stream; each figure is the median
// over --reps blocks of --iters repetitions. Exits 1 with the reason when no
// GPU is usable.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/nccl/nccl_backend.h"
#include "core/fusion.h"
#include "resnet50_shapes.h"

namespace {

using namespace khorovod;

#define CHECK_CUDA(expr)                                               \
  do {                                                                 \
    cudaError_t e_ = (expr);                                           \
    if (e_ != cudaSuccess) {                                           \
      std::fprintf(stderr, "%s: %s\n", #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                    \
    }                                                                  \
  } while (0)

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median milliseconds per iteration of `body`, timed with events on `stream`.
template <typename F>
double TimeMs(cudaStream_t stream, int reps, int iters, F body) {
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  body();  // warm-up
  CHECK_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> per_iter;
  for (int r = 0; r < reps; ++r) {
    CHECK_CUDA(cudaEventRecord(start, stream));
    for (int i = 0; i < iters; ++i) body();
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    per_iter.push_back(ms / iters);
  }
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  return Median(per_iter);
}

}  // namespace

// --reps N --iters N; false (after saying why) on anything else.
static bool ParseArgs(int argc, char** argv, int& reps, int& iters) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (value <= 0) {
      std::fprintf(stderr, "%s needs a positive integer\n", flag.c_str());
      return false;
    }
    if (flag == "--reps")
      reps = value;
    else if (flag == "--iters")
      iters = value;
    else {
      std::fprintf(stderr, "usage: %s [--reps N] [--iters N]\n", argv[0]);
      return false;
    }
  }
  return true;
}

int main(int argc, char** argv) {
  int reps = 11, iters = 20;
  if (!ParseArgs(argc, argv, reps, iters)) return 2;
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
    std::fprintf(stderr, "no usable GPU: %s\n",
                 e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
    return 1;
  }
  CHECK_CUDA(cudaSetDevice(0));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));

  std::vector<size_t> bytes;
  size_t total = 0;
  for (const auto& s : bench::ResNet50ParameterShapes()) {
    size_t n = 1;
    for (int64_t d : s.shape) n *= static_cast<size_t>(d);
    bytes.push_back(n * sizeof(float));
    total += bytes.back();
  }
  std::vector<void*> grads(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) CHECK_CUDA(cudaMalloc(&grads[i], bytes[i]));
  void *fusion = nullptr, *plain_src = nullptr;
  CHECK_CUDA(cudaMalloc(&fusion, total));
  CHECK_CUDA(cudaMalloc(&plain_src, total));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  auto pack_unpack = [&] {
    size_t off = 0;
    for (size_t i = 0; i < bytes.size(); ++i) {
      CHECK_CUDA(cudaMemcpyAsync(static_cast<char*>(fusion) + off, grads[i], bytes[i],
                                 cudaMemcpyDeviceToDevice, stream));
      off += bytes[i];
    }
    off = 0;
    for (size_t i = 0; i < bytes.size(); ++i) {
      CHECK_CUDA(cudaMemcpyAsync(grads[i], static_cast<char*>(fusion) + off, bytes[i],
                                 cudaMemcpyDeviceToDevice, stream));
      off += bytes[i];
    }
  };
  auto plain_twice = [&] {  // the same bytes moved as two whole copies
    CHECK_CUDA(cudaMemcpyAsync(fusion, plain_src, total, cudaMemcpyDeviceToDevice, stream));
    CHECK_CUDA(cudaMemcpyAsync(plain_src, fusion, total, cudaMemcpyDeviceToDevice, stream));
  };
  const double pack_ms = TimeMs(stream, reps, iters, pack_unpack);
  const double plain_ms = TimeMs(stream, reps, iters, plain_twice);
  const double gb = 2.0 * static_cast<double>(total) / 1e9;

  Config config;  // world size 1 on device 0
  auto backend = MakeNcclBackend(BackendInit{&config, nullptr});
  if (!backend.ok()) {
    std::fprintf(stderr, "nccl backend: %s\n", backend.status().ToString().c_str());
    return 1;
  }
  DeviceOps& ops = *(*backend)->device_ops();
  const FusionLayout layout = LayoutFusedAllreduce(bytes, std::vector<bool>(bytes.size(), true));
  auto* buffer = static_cast<std::byte*>(fusion);  // total bytes, more than the packed block needs
  const std::vector<const void*> inputs(grads.begin(), grads.end());
  const std::vector<Backend::Span> spans = layout.Spans(buffer, grads, sizeof(float));
  auto copy = [&](void* dst, const void* src, size_t n) { return ops.Copy(dst, src, n); };
  auto zero = [&](void* dst, size_t n) { return ops.Zero(dst, n); };
  // The backend runs on its own stream and returns once the step is done, so
  // the step is timed on the host clock, not with events on `stream`.
  auto step = [&] {
    Status s = PackFusion(layout, buffer, inputs, grads, copy, zero);
    if (s.ok()) s = ops.AllreduceScaled(spans, DataType::kFloat32, ReduceOp::kAverage, 1.0, 1.0);
    if (s.ok()) s = UnpackFusion(layout, buffer, grads, copy);
    if (s.ok()) s = ops.Flush();
    if (!s.ok()) {
      std::fprintf(stderr, "allreduce: %s\n", s.ToString().c_str());
      std::exit(1);
    }
  };
  step();  // warm-up
  std::vector<double> step_samples;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) step();
    const std::chrono::duration<double, std::milli> dt = std::chrono::steady_clock::now() - t0;
    step_samples.push_back(dt.count() / iters);
  }
  const double step_ms = Median(step_samples);

  std::printf("gpu: %s\n", prop.name);
  std::printf("resnet50 gradients: %zu tensors, %.1f MB\n", bytes.size(),
              static_cast<double>(total) / 1e6);
  std::printf("pack+unpack (161 copies each way): %8.3f ms  %7.1f GB/s\n", pack_ms,
              gb / (pack_ms / 1e3));
  std::printf("plain d2d copy (same bytes):       %8.3f ms  %7.1f GB/s\n", plain_ms,
              gb / (plain_ms / 1e3));
  std::printf("pack/plain bandwidth ratio:        %8.3f  (target >= 0.8)\n", plain_ms / pack_ms);
  std::printf("nccl fused allreduce, world 1:     %8.3f ms per step\n", step_ms);
  return 0;
}
