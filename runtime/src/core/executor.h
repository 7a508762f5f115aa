// Executor: runs a round's responses on the data-plane backend and
// completes the local operations they name.
//
// Allreduces planned together (core/fusion.h) are packed into a fusion
// buffer, reduced once, scaled and unpacked; a lone allreduce runs in place
// on the caller's buffers. A rank without a local op for a name (it joined)
// contributes zeros. Allgather, alltoall and reducescatter allocate their
// result tensor here.
//
// Device responses (Response::device is kCUDA) run on the session's device
// backend, created at the first one (backend/device_backend.h); allreduce and
// reducescatter go through DeviceReducer, the other collectives straight
// to the backend, and results live in device memory.
//
// A backend failure completes the affected ops with the error and is
// returned: the caller must treat the backend as unusable afterwards. An
// operation a device backend refuses as kInvalidArgument (a scaling it
// cannot compute; refused alike on every rank before anything is sent)
// fails alone.
//
// Observability: each executed group is timed (two clock reads) and counted
// in WorkerMetrics by operation; with a Timeline, each tensor's negotiation,
// packing, collective and unpacking phases are recorded. Both are optional.
//
// Thread-safety: none; owned by the background thread.
#pragma once

#include <cstddef>
#include <vector>

#include "backend/backend.h"
#include "backend/device_backend.h"
#include "core/device_reduce.h"
#include "core/negotiator.h"
#include "core/tensor_queue.h"
#include "khorovod/placement.h"
#include "observability/timeline.h"
#include "observability/worker_metrics.h"

namespace khorovod {

class Executor {
 public:
  // `placement`: this rank in the group the backend spans (a process set's
  // executor has only rank and size; device Adasum reads the hosts).
  // `device` may be null: device responses then fail.
  Executor(const Placement& placement, size_t fusion_threshold, Backend* backend,
           DeviceBackend* device, TensorQueue* queue, WorkerMetrics* metrics = nullptr,
           Timeline* timeline = nullptr);

  Status Execute(const std::vector<Response>& responses, Negotiator& negotiator);
  // Completes allreduces whose contributions all came with the negotiation
  // (core/eager_allreduce.h); no backend call, so it cannot fail.
  void CompleteEager(const std::vector<Negotiator::EagerAllreduce>& eager, Negotiator& negotiator);

 private:
  using TimePoint = std::chrono::steady_clock::time_point;

  Status RunAllreduce(const std::vector<const Response*>& group, Negotiator& negotiator);
  Status ReduceOnHost(const std::vector<const Response*>& group,
                      std::vector<std::optional<PendingOp>>& ops, TimePoint* packed_at,
                      TimePoint* reduced_at);
  Status RunAllgather(Backend& backend, const Response& r, PendingOp& op);
  Status RunAlltoall(Backend& backend, const Response& r, PendingOp& op);
  Status RunReducescatter(Backend& backend, const Response& r, PendingOp& op);
  // The backend for `r`'s device (creating the device backend if needed).
  StatusOr<Backend*> BackendFor(const Response& r);
  // An uninitialized result on the op's device.
  StatusOr<Tensor> NewResult(Backend& backend, const PendingOp& op, DataType dtype, Shape shape);
  void ApplyPostScale(const Response& r, void* data, size_t count);
  std::byte* FusionBuffer(size_t bytes);
  void TraceOp(const PendingOp& op, Timeline::Clock::time_point start,
               Timeline::Clock::time_point end);

  Placement placement_;  // rank and size in the backend's group
  size_t fusion_threshold_;
  Backend* backend_;
  DeviceBackend* device_;
  DeviceReducer device_reducer_;
  TensorQueue* queue_;
  std::vector<std::byte> fusion_buffer_;
  std::vector<std::byte> adasum_scratch_;  // device Adasum's host copy
  WorkerMetrics* metrics_;
  Timeline* timeline_;
};

}  // namespace khorovod
