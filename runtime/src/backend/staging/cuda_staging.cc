// Registers the "staging" backend for device tensors: a CUDA DeviceCopier
// around the configured host backend (see backend/staging/staging_backend.h).
// Built whenever the CUDA runtime is found, with or without NCCL.
#include <memory>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_status.h"
#include "backend/registry.h"
#include "backend/staging/staging_backend.h"

namespace khorovod {
namespace {

// Copies on the runtime's own non-blocking stream and waits for them; a
// local copy cannot be held up by a peer, so the wait needs no deadline.
class CudaCopier final : public DeviceCopier {
 public:
  explicit CudaCopier(std::unique_ptr<cuda::CudaStream> stream) : stream_(std::move(stream)) {}

  Device device() const override { return Device{DeviceKind::kCUDA, stream_->device()}; }

  Status ToHost(void* host, const void* device, size_t bytes) override {
    return Copy(host, device, bytes, cudaMemcpyDeviceToHost);
  }
  Status ToDevice(void* device, const void* host, size_t bytes) override {
    return Copy(device, host, bytes, cudaMemcpyHostToDevice);
  }
  Status Copy(void* dst, const void* src, size_t bytes) override {
    return Copy(dst, src, bytes, cudaMemcpyDeviceToDevice);
  }
  Status Zero(void* device, size_t bytes) override {
    KH_RETURN_IF_ERROR(stream_->Enter());
    KH_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(device, 0, bytes, stream_->get()));
    KH_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_->get()));
    return Status::Ok();
  }
  StatusOr<std::shared_ptr<void>> Allocate(size_t bytes) override {
    return cuda::AllocateOn(stream_->device(), bytes);
  }

 private:
  Status Copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    KH_RETURN_IF_ERROR(stream_->Enter());
    KH_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, kind, stream_->get()));
    KH_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_->get()));
    return Status::Ok();
  }

  std::unique_ptr<cuda::CudaStream> stream_;
};

StatusOr<std::unique_ptr<Backend>> MakeStagingBackend(const BackendInit& init) {
  if (!init.config) return Status::FailedPrecondition("staging backend needs a config");
  auto device = cuda::SelectDevice(*init.config);
  if (!device.ok()) return device.status();
  auto stream = cuda::CudaStream::Create(*device);
  if (!stream.ok()) return stream.status();
  // The staging path stays on Gloo under "auto": the host backend of the
  // runtime already owns this host's shared-memory segment.
  const std::string& host_name =
      init.config->cpu_backend == "auto" ? "gloo" : init.config->cpu_backend;
  auto host = BackendRegistry::Create(host_name, init);
  if (!host.ok()) return host.status();
  if (!(*host)->SupportsDevice(Device{})) {
    return Status::InvalidArgument("KHOROVOD_CPU_OPERATIONS='" + init.config->cpu_backend +
                                   "' does not work on host memory; staging needs one that does");
  }
  return std::unique_ptr<Backend>(std::make_unique<StagingBackend>(
      std::move(*host), std::make_unique<CudaCopier>(std::move(*stream)), init.config->rank,
      init.config->size));
}

}  // namespace

KH_REGISTER_BACKEND(staging, "staging", MakeStagingBackend)
KH_REGISTER_DEVICE(staging, "staging", cuda::ResolveDevice)

}  // namespace khorovod
