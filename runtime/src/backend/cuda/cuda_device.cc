#include "backend/cuda/cuda_device.h"

#include <memory>
#include <string>

#include "backend/cuda/cuda_status.h"

namespace khorovod::cuda {

StatusOr<int> SelectDevice(const Config& config) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    Status s = FromCuda(e == cudaSuccess ? cudaErrorNoDevice : e, "cudaGetDeviceCount");
    return Status::FailedPrecondition("no usable CUDA device: " + s.message());
  }
  if (config.gpu_device >= 0) {
    if (config.gpu_device >= count) {
      return Status::InvalidArgument("KHOROVOD_GPU_DEVICE=" + std::to_string(config.gpu_device) +
                                     " but only " + std::to_string(count) + " devices are visible");
    }
    return config.gpu_device;
  }
  return config.local_rank % count;
}

StatusOr<Device> ResolveDevice(const Config& config) {
  StatusOr<int> index = SelectDevice(config);
  if (!index.ok()) return index.status();
  return Device{DeviceKind::kCUDA, *index};
}

StatusOr<std::shared_ptr<void>> AllocateOn(int device, size_t bytes) {
  if (bytes == 0) return std::shared_ptr<void>();
  KH_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  void* p = nullptr;
  KH_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
  // cudaFree finds the device from the pointer (unified addressing), so
  // the deleter works on any thread, after the backend is gone.
  return std::shared_ptr<void>(p, [](void* q) { (void)cudaFree(q); });
}

StatusOr<std::unique_ptr<CudaStream>> CudaStream::Create(int device) {
  KH_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  KH_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t done = nullptr;
  // Timing is not needed; without it, recording and querying are cheaper.
  if (cudaError_t e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming); e != cudaSuccess) {
    (void)cudaStreamDestroy(stream);
    return FromCuda(e, "cudaEventCreateWithFlags");
  }
  return std::unique_ptr<CudaStream>(new CudaStream(device, stream, done));
}

CudaStream::~CudaStream() {
  // Neither call waits for outstanding work: both release lazily once the
  // device is done, so a destructor after an abort cannot hang.
  (void)cudaSetDevice(device_);
  (void)cudaEventDestroy(done_);
  (void)cudaStreamDestroy(stream_);
}

Status CudaStream::Enter() const { return FromCuda(cudaSetDevice(device_), "cudaSetDevice"); }

}  // namespace khorovod::cuda
