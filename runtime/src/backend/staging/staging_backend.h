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
// CUDA: backend/cuda/cuda_staging.cc supplies a CUDA copier, and the unit
// tests supply one over host memory.
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

// Synchronous copies between device memory and host memory. Each call
// returns once the bytes have arrived.
class DeviceCopier {
 public:
  virtual ~DeviceCopier() = default;
  virtual Device device() const = 0;
  virtual Status ToHost(void* host, const void* device, size_t bytes) = 0;
  virtual Status ToDevice(void* device, const void* host, size_t bytes) = 0;
};

class StagingBackend final : public Backend {
 public:
  // `rank` is this process's rank in the host backend's group (allgather
  // stages only this rank's share of the input).
  StagingBackend(std::unique_ptr<Backend> host, std::unique_ptr<DeviceCopier> copier, int rank);

  std::string_view name() const override { return "staging"; }
  bool SupportsDevice(const Device& device) const override { return device == copier_->device(); }

  Status Allreduce(const void* in, void* out, size_t count, DataType dtype, ReduceOp op) override;
  Status AllreduceSpans(const std::vector<Span>& spans, DataType dtype, ReduceOp op) override;
  Status Allgatherv(const void* in, void* out, const std::vector<size_t>& counts,
                    DataType dtype) override;
  Status Broadcast(void* buffer, size_t count, DataType dtype, int root) override;
  Status Alltoallv(const void* in, const std::vector<int64_t>& send_counts, void* out,
                   const std::vector<int64_t>& recv_counts, DataType dtype) override;
  Status Barrier() override;

 private:
  // Grows the staging buffers; their contents are not preserved.
  std::byte* Input(size_t bytes);
  std::byte* Output(size_t bytes);

  std::unique_ptr<Backend> host_;
  std::unique_ptr<DeviceCopier> copier_;
  int rank_;
  std::vector<std::byte> input_;
  std::vector<std::byte> output_;
};

}  // namespace khorovod
