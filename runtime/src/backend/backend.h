// Backend: the data plane, i.e. the collectives a fused Response runs on.
//
// The negotiation protocol (core/negotiator.h) is written once, over its own
// transport (core/control_channel.h); a backend only moves and reduces bytes,
// though it may offer a faster transport for that protocol than Gloo's
// (TakeControlChannel). Calls arrive one at a time from the runtime's
// background thread, in the same order on every rank. Buffers live on the
// device the backend was created for (host memory for Gloo; device memory
// and the runtime's stream for NCCL). `in` and `out` may alias.
//
// Errors: a transport failure (dead peer, reset connection, timeout) returns
// kUnavailable; the caller treats the backend as broken afterwards until a
// reset rebuilds it. Backends never throw and never abort.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "backend/control_channel.h"
#include "khorovod/dtype.h"
#include "khorovod/ops.h"
#include "khorovod/status.h"
#include "khorovod/tensor.h"

namespace khorovod {

class DeviceOps;

// What a device backend hands to the next session's backend of its kind
// (NCCL: its communicator, for ncclCommShrink/ncclCommGrow, see
// backend/nccl/nccl_reform.h). Opaque to the core, which only carries it
// from one session to the next; destroying it releases what it holds.
class BackendLegacy {
 public:
  virtual ~BackendLegacy() = default;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;
  virtual bool SupportsDevice(const Device& device) const = 0;
  // True when kAverage already yields the average (NCCL's ncclAvg), so the
  // caller must not divide again. Device backends say so because the caller
  // cannot scale device memory itself.
  virtual bool AveragesNatively() const { return false; }

  // out = reduce(in over all ranks). kAverage reduces as a sum and the
  // caller applies the 1/size scaling, unless AveragesNatively().
  virtual Status Allreduce(const void* in, void* out, size_t count, DataType dtype,
                           ReduceOp op) = 0;
  // Reduces every span in place. The spans of a fused allreduce arrive
  // already packed (core/fusion.h, LayoutFusedAllreduce: small tensors in
  // one fusion-buffer span, large ones as their own): a backend reduces
  // them as they are and never packs again. It may treat them as one
  // buffer (Gloo's ring does, without copies); the default copies them into
  // one scratch buffer and calls Allreduce.
  struct Span {
    void* data;
    size_t count;  // elements
  };
  virtual Status AllreduceSpans(const std::vector<Span>& spans, DataType dtype, ReduceOp op);
  // out = concatenation over ranks r of counts[r] elements; in holds
  // counts[rank] elements.
  virtual Status Allgatherv(const void* in, void* out, const std::vector<size_t>& counts,
                            DataType dtype) = 0;
  virtual Status Broadcast(void* buffer, size_t count, DataType dtype, int root) = 0;
  // send_counts[r] elements go to rank r (in rank order in `in`); recv_counts[r]
  // elements arrive from rank r (in rank order in `out`).
  virtual Status Alltoallv(const void* in, const std::vector<int64_t>& send_counts, void* out,
                           const std::vector<int64_t>& recv_counts, DataType dtype) = 0;
  virtual Status Barrier() = 0;

  // Device backends (NCCL, host staging) also provide the memory operations
  // the executor's device path needs; host backends return null.
  virtual DeviceOps* device_ops() { return nullptr; }

  // A transport for the negotiation that this backend's placement makes
  // faster than the Gloo one (shared memory when every rank runs on this
  // host), handed over once, when the session starts; null: the runtime
  // negotiates over Gloo. It must not depend on the backend's lifetime.
  virtual std::unique_ptr<ControlChannel> TakeControlChannel() { return nullptr; }

  // Called instead of plain destruction when the session ends: what the
  // next session's backend may build on (null: nothing). The backend is
  // destroyed right after, and must not touch what it handed over.
  virtual std::unique_ptr<BackendLegacy> Retire() { return nullptr; }
};

// DeviceOps: what the executor needs to run a device response without
// touching device memory itself. Copies, fills and reductions are ordered
// with the backend's collectives (they run in call order on the backend's
// stream); Flush() returns once all of them have finished, so the caller
// completes the user's operation only after it. Pointers are device memory
// of the backend's device.
class DeviceOps {
 public:
  virtual ~DeviceOps() = default;
  // `bytes` of device memory, freed by the returned pointer's deleter,
  // which must not need the backend (results outlive it). Null for 0 bytes.
  virtual StatusOr<std::shared_ptr<void>> Allocate(size_t bytes) = 0;
  virtual Status Copy(void* dst, const void* src, size_t bytes) = 0;
  virtual Status Zero(void* dst, size_t bytes) = 0;
  // Between host memory and the backend's device, for the work only the
  // host computes (core/device_adasum.h). ToHost returns once the bytes are
  // on the host (it waits for the device work queued before it); ToDevice
  // may return before they arrive, and the host buffer must live until
  // Flush() (the caller's buffer may be pageable).
  virtual Status ToHost(void* host, const void* device, size_t bytes) = 0;
  virtual Status ToDevice(void* device, const void* host, size_t bytes) = 0;
  // The spans (packed as for AllreduceSpans; in place) become
  //   postscale * reduce(prescale * span over ranks),
  // kAverage dividing the reduction by the world size: scaling and
  // averaging happen here, because only the backend can touch the memory.
  // A combination the backend cannot compute is kInvalidArgument, the same
  // on every rank.
  virtual Status AllreduceScaled(const std::vector<Backend::Span>& spans, DataType dtype,
                                 ReduceOp op, double prescale, double postscale) = 0;
  virtual Status Flush() = 0;
};

}  // namespace khorovod
