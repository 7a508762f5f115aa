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
// such failure the communicator is aborted (ncclCommAbort, which does not
// wait for peers) and the object refuses further work; the runtime then
// resets and forms a new communicator with a new unique id.
//
// Thread-safety: one thread at a time (the runtime's background thread).
#pragma once

#include "backend/nccl/nccl_api.h"

#include <chrono>
#include <memory>
#include <string>

#include "backend/cuda/cuda_device.h"
#include "khorovod/dtype.h"
#include "khorovod/ops.h"
#include "khorovod/status.h"

namespace khorovod {

class NcclComm {
 public:
  // Collective across all `size` ranks, which must pass the same id.
  // Fails (and leaves nothing behind) if the peers do not all arrive
  // within `timeout`.
  static StatusOr<std::unique_ptr<NcclComm>> Create(const ncclUniqueId& id, int rank, int size,
                                                    const cuda::CudaStream& stream,
                                                    std::chrono::milliseconds timeout);
  // Aborts: never waits for peers.
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  ncclComm_t get() const { return comm_; }
  bool broken() const { return !broken_.ok(); }

  // Converts the result of an NCCL call: ncclInProgress is polled until the
  // call has been enqueued (non-blocking mode); any error aborts.
  Status Check(ncclResult_t r, const char* what);
  // Records the stream's event and waits for it while polling the async
  // error; aborts on an error or when `timeout` passes.
  Status WaitForStream(const cuda::CudaStream& stream, const char* what);

 private:
  NcclComm(ncclComm_t comm, std::chrono::milliseconds timeout) : comm_(comm), timeout_(timeout) {}
  Status Fail(std::string message);

  ncclComm_t comm_;
  std::chrono::milliseconds timeout_;
  Status broken_;
};

// The NCCL enums for a khorovod dtype and reduce op; kInvalidArgument for a
// combination NCCL cannot do.
StatusOr<ncclDataType_t> ToNccl(DataType dtype);
StatusOr<ncclRedOp_t> ToNccl(ReduceOp op);

}  // namespace khorovod
