// StagingBackend: collectives on device tensors through a host backend.
//
// Every collective copies its device input to a host staging buffer, runs
// the host backend (Gloo) on it, and copies the result back to the device:
// device -> host -> Gloo -> device. It is the fallback for device tensors
// when NCCL is not built, when the user asks for it
// (KHOROVOD_GPU_OPERATIONS=staging), or when several processes share one
// GPU (NCCL refuses two ranks on one device).
//
// The copies go through a DeviceCopier, so this file knows nothing about
// CUDA: backend/cuda/cuda_staging.cc supplies a CUDA copier, and the tests
// supply ones over host memory (tests/integration/emulated_device.h).
//
// DeviceOps: allocation, device-to-device copies and zero-fills are the
// copier's; AllreduceScaled stages the spans to one host buffer and scales
// and averages there with the host kernels, so every dtype, op and factor
// works, with the host path's rounding.
//
// Thread-safety: like every Backend, one caller at a time (the runtime's
// background thread). The staging buffers are reused between calls.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace khorovod {

// Synchronous memory operations on one device. Each call returns once the
// bytes have arrived.
class DeviceCopier {
 public:
  virtual ~DeviceCopier() = default;
  virtual Device device() const = 0;
  virtual Status ToHost(void* host, const void* device, size_t bytes) = 0;
  virtual Status ToDevice(void* device, const void* host, size_t bytes) = 0;
  // Device to device.
  virtual Status Copy(void* dst, const void* src, size_t bytes) = 0;
  virtual Status Zero(void* device, size_t bytes) = 0;
  // As DeviceOps::Allocate: the deleter must not need the copier.
  virtual StatusOr<std::shared_ptr<void>> Allocate(size_t bytes) = 0;
};

class StagingBackend final : public Backend, public DeviceOps {
 public:
  // `rank` and `size` are this process's rank and the group's size in the
  // host backend (allgather stages only this rank's share of the input;
  // kAverage divides by the size).
  StagingBackend(std::unique_ptr<Backend> host, std::unique_ptr<DeviceCopier> copier, int rank,
                 int size);

  std::string_view name() const override { return "staging"; }
  DeviceOps* device_ops() override { return this; }
  bool SupportsDevice(const Device& device) const override { return device == copier_->device(); }

  Status Allreduce(const void* in, void* out, size_t count, DataType dtype, ReduceOp op) override;
  Status AllreduceSpans(const std::vector<Span>& spans, DataType dtype, ReduceOp op) override;
  Status Allgatherv(const void* in, void* out, const std::vector<size_t>& counts,
                    DataType dtype) override;
  Status Broadcast(void* buffer, size_t count, DataType dtype, int root) override;
  Status Alltoallv(const void* in, const std::vector<int64_t>& send_counts, void* out,
                   const std::vector<int64_t>& recv_counts, DataType dtype) override;
  Status Barrier() override;

  StatusOr<std::shared_ptr<void>> Allocate(size_t bytes) override;
  Status Copy(void* dst, const void* src, size_t bytes) override;
  Status Zero(void* dst, size_t bytes) override;
  Status ToHost(void* host, const void* device, size_t bytes) override;
  Status ToDevice(void* device, const void* host, size_t bytes) override;
  Status AllreduceScaled(const std::vector<Span>& spans, DataType dtype, ReduceOp op,
                         double prescale, double postscale) override;
  Status Flush() override { return Status::Ok(); }  // every copy is synchronous

 private:
  // Copies the spans into one host buffer, runs before(host, count), the
  // host backend's reduction, after(host, count), and copies back.
  template <typename Before, typename After>
  Status ReduceStaged(const std::vector<Span>& spans, DataType dtype, ReduceOp op, Before&& before,
                      After&& after);
  // Grows the staging buffers; their contents are not preserved.
  std::byte* Input(size_t bytes);
  std::byte* Output(size_t bytes);

  std::unique_ptr<Backend> host_;
  std::unique_ptr<DeviceCopier> copier_;
  int rank_;
  int size_;
  std::vector<std::byte> input_;
  std::vector<std::byte> output_;
};

}  // namespace khorovod
