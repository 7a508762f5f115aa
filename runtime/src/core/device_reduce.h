// DeviceReducer: allreduce and reducescatter of device tensors.
//
// The executor's host path scales, packs and zero-fills with memcpy; device
// memory cannot be touched that way, so this path asks the device backend's
// DeviceOps for every byte it moves: small tensors are copied into a
// device fusion buffer, large ones are reduced where they live (out of
// place: copied into the output first), a joined rank's share is zeroed on
// the device, and scaling and averaging are the backend's
// (DeviceOps::AllreduceScaled). The layout depends only on the responses,
// so every rank builds the same spans, joined or not. Every call ends with
// DeviceOps::Flush(), so the user's operation completes only after the
// device work did.
//
// Errors: whatever the backend returns; the executor decides what is fatal.
//
// Thread-safety: none; owned by the executor (the background thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "core/message.h"
#include "core/tensor_queue.h"

namespace khorovod {

class DeviceReducer {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  DeviceReducer(int rank, int size, size_t fusion_threshold)
      : rank_(rank), size_(size), fusion_threshold_(fusion_threshold) {}

  // `ops[i]` is this rank's op for group[i], or empty on a joined rank.
  // Sets *packed_at and *reduced_at for the timeline.
  Status Allreduce(DeviceOps& device, const std::vector<const Response*>& group,
                   const std::vector<std::optional<PendingOp>>& ops, TimePoint* packed_at,
                   TimePoint* reduced_at);
  // Sets the op's output to this rank's rows, in device memory.
  Status Reducescatter(DeviceOps& device, const Response& r, PendingOp& op);

 private:
  StatusOr<std::byte*> Fusion(DeviceOps& device, size_t bytes);
  // Large one-off fusions should not pin device memory forever.
  void TrimFusion();

  int rank_;
  int size_;
  size_t fusion_threshold_;
  std::shared_ptr<void> fusion_;
  size_t fusion_size_ = 0;
};

}  // namespace khorovod
