// NcclComm: one NCCL communicator and the rules for waiting on it without
// ever hanging.
//
// The communicator is created in NCCL's non-blocking mode, so neither its
// initialization nor any collective can block the calling thread inside
// NCCL: calls return ncclInProgress and this class polls
// ncclCommGetAsyncError under a deadline. Work is complete when the
// stream's event has fired; while waiting for it the async error is polled
// too, so a peer that died (NCCL reports a remote or system error) or a
// deadline that passes turns into kUnavailable instead of a hang. On any
// such failure the object refuses further work and its communicator is
// revoked (ncclCommRevoke, where the loaded NCCL has it: in-flight kernels
// stop, and the communicator is kept for the next session to shrink) or
// else aborted (ncclCommAbort, which does not wait for peers; the next
// session then forms a new communicator with a new unique id). A healthy
// communicator is kept across sessions too (NcclBackend::Retire), for a
// shrink, a grow or plain reuse (nccl_reform.h).
//
// Thread-safety: one thread at a time (the runtime's background thread).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "backend/nccl/nccl_api.h"
#include "backend/nccl/nccl_library.h"
#include "khorovod/dtype.h"
#include "khorovod/ops.h"
#include "khorovod/status.h"

namespace khorovod {

class NcclComm {
 public:
  // Collective across all `size` ranks, which must pass the same id.
  // Fails (and leaves nothing behind) if the peers do not all arrive
  // within `timeout`.
  static StatusOr<std::unique_ptr<NcclComm>> Create(std::shared_ptr<const NcclLibrary> lib,
                                                    const ncclUniqueId& id, int rank, int size,
                                                    const cuda::CudaStream& stream,
                                                    std::chrono::milliseconds timeout);
  // ncclCommShrink of `parent` without `exclude` (old ranks). `abort_parent`
  // passes NCCL_SHRINK_ABORT (a parent that may still be in a kernel and
  // was not revoked). Collective over the parent's surviving ranks.
  static StatusOr<std::unique_ptr<NcclComm>> Shrink(NcclComm& parent, std::vector<int> exclude,
                                                    bool abort_parent);
  // ncclCommGrow to `size` ranks. Existing members pass their communicator
  // (`id` only on the grow root, from GrowId()); newcomers pass null and
  // the root's id with their assigned `rank`.
  static StatusOr<std::unique_ptr<NcclComm>> Grow(std::shared_ptr<const NcclLibrary> lib,
                                                  NcclComm* parent, const ncclUniqueId* id,
                                                  int rank, int size,
                                                  const cuda::CudaStream& stream,
                                                  std::chrono::milliseconds timeout);
  // The id a grow root hands to the newcomers (ncclCommGetUniqueId).
  StatusOr<ncclUniqueId> GrowId();
  // Aborts: never waits for peers.
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  ncclComm_t get() const { return comm_; }
  const NcclLibrary& lib() const { return *lib_; }
  bool broken() const { return !broken_.ok(); }
  // Still holds a communicator: healthy, or broken but revoked.
  bool alive() const { return comm_ != nullptr; }
  bool revoked() const { return revoked_; }

  // Converts the result of an NCCL call: ncclInProgress is polled until the
  // call has been enqueued (non-blocking mode); any error aborts.
  Status Check(ncclResult_t r, const char* what);
  // Records the stream's event and waits for it while polling the async
  // error; aborts on an error or when `timeout` passes.
  Status WaitForStream(const cuda::CudaStream& stream, const char* what);

 private:
  NcclComm(std::shared_ptr<const NcclLibrary> lib, ncclComm_t comm,
           std::chrono::milliseconds timeout)
      : lib_(std::move(lib)), comm_(comm), timeout_(timeout) {}
  Status Fail(std::string message);
  // Polls the async error of a communicator being created until it is
  // ready; the object aborts it on failure.
  static StatusOr<std::unique_ptr<NcclComm>> Adopt(std::shared_ptr<const NcclLibrary> lib,
                                                   ncclComm_t comm, ncclResult_t r,
                                                   std::chrono::milliseconds timeout,
                                                   const char* what);
  std::string Error(ncclResult_t r) const;

  std::shared_ptr<const NcclLibrary> lib_;
  ncclComm_t comm_;
  std::chrono::milliseconds timeout_;
  Status broken_;
  bool revoked_ = false;
};

// The NCCL enums for a khorovod dtype and reduce op; kInvalidArgument for a
// combination NCCL cannot do.
StatusOr<ncclDataType_t> ToNccl(DataType dtype);
StatusOr<ncclRedOp_t> ToNccl(ReduceOp op);

}  // namespace khorovod
