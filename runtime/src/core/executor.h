// Executor: runs a round's responses on the data-plane backend and
// completes the local operations they name.
//
// Allreduces planned together (core/fusion.h) are packed into a fusion
// buffer, reduced once, scaled and unpacked; a lone allreduce runs in place
// on the caller's buffers. A rank without a local op for a name (it joined)
// contributes zeros. Allgather, alltoall and reducescatter allocate their
// result tensor here.
//
// A backend failure completes the affected ops with the error and is
// returned: the caller must treat the backend as unusable afterwards.
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
#include "core/controller.h"
#include "core/tensor_queue.h"
#include "observability/timeline.h"
#include "observability/worker_metrics.h"

namespace khorovod {

class Executor {
 public:
  Executor(int rank, int size, size_t fusion_threshold, Backend* backend, TensorQueue* queue,
           WorkerMetrics* metrics = nullptr, Timeline* timeline = nullptr);

  Status Execute(const std::vector<Response>& responses, Controller& controller);
  // Completes allreduces whose contributions all came with the negotiation
  // (core/eager_allreduce.h); no backend call, so it cannot fail.
  void CompleteEager(const std::vector<Controller::EagerAllreduce>& eager, Controller& controller);

 private:
  Status RunAllreduce(const std::vector<const Response*>& group, Controller& controller);
  Status RunAllgather(const Response& r, PendingOp& op);
  Status RunBroadcast(const Response& r, PendingOp& op);
  Status RunAlltoall(const Response& r, PendingOp& op);
  Status RunReducescatter(const Response& r, PendingOp& op);
  void ApplyPostScale(const Response& r, void* data, size_t count);
  std::byte* FusionBuffer(size_t bytes);
  void TraceOp(const PendingOp& op, Timeline::Clock::time_point start, Timeline::Clock::time_point end);

  int rank_;
  int size_;
  size_t fusion_threshold_;
  Backend* backend_;
  TensorQueue* queue_;
  std::vector<std::byte> fusion_buffer_;
  WorkerMetrics* metrics_;
  Timeline* timeline_;
};

}  // namespace khorovod
