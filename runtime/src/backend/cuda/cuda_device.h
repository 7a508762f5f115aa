// Which GPU this process uses, and a small RAII stream + event pair.
//
// Pinning: Config::gpu_device when the user set it (KHOROVOD_GPU_DEVICE),
// otherwise local_rank modulo the number of visible devices, so the
// processes of one host spread over its GPUs as Horovod's do.
//
// Thread-safety: SelectDevice is a pure query. CudaStream is used by one
// thread at a time; it makes its device current on the calling thread
// whenever it is used (the CUDA current device is per thread).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "khorovod/config.h"
#include "khorovod/status.h"
#include "khorovod/tensor.h"

namespace khorovod::cuda {

// The ordinal to use, or kFailedPrecondition when there is no usable device
// (no driver, no GPU), or kInvalidArgument for a pinned ordinal that does
// not exist.
StatusOr<int> SelectDevice(const Config& config);
// SelectDevice as a Device: the DeviceResolver of the CUDA backends.
StatusOr<Device> ResolveDevice(const Config& config);

// `bytes` of memory on `device` (cudaMalloc), freed with cudaFree by the
// returned pointer's deleter, which needs nothing else alive. Null for 0.
StatusOr<std::shared_ptr<void>> AllocateOn(int device, size_t bytes);

// A non-blocking stream (it never waits for the legacy default stream, so
// the runtime's work does not serialize with the user's) and one event for
// completion queries.
class CudaStream {
 public:
  static StatusOr<std::unique_ptr<CudaStream>> Create(int device);
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  int device() const { return device_; }
  cudaStream_t get() const { return stream_; }
  cudaEvent_t done() const { return done_; }
  // Makes the device current on the calling thread.
  Status Enter() const;

 private:
  CudaStream(int device, cudaStream_t stream, cudaEvent_t done)
      : device_(device), stream_(stream), done_(done) {}
  int device_;
  cudaStream_t stream_;
  cudaEvent_t done_;
};

}  // namespace khorovod::cuda
