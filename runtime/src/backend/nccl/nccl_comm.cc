#include "backend/nccl/nccl_comm.h"

#include <thread>

#include "backend/cuda/cuda_status.h"

namespace khorovod {
namespace {

using Clock = std::chrono::steady_clock;

// Polling backs off from spinning (a small allreduce finishes in tens of
// microseconds) to short sleeps, so a long collective does not burn a core.
class Backoff {
 public:
  void Pause() {
    if (++polls_ < 64) return;
    if (polls_ < 256) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }

 private:
  int polls_ = 0;
};

}  // namespace

std::string NcclComm::Error(ncclResult_t r) const {
  std::string msg = lib_->GetErrorString(r);
  if (comm_) {
    if (const char* last = lib_->GetLastError(comm_); last && *last)
      msg += std::string(": ") + last;
  }
  return msg;
}

StatusOr<std::unique_ptr<NcclComm>> NcclComm::Adopt(std::shared_ptr<const NcclLibrary> lib,
                                                    ncclComm_t comm, ncclResult_t r,
                                                    std::chrono::milliseconds timeout,
                                                    const char* what) {
  if (r != ncclSuccess && r != ncclInProgress) {
    std::string msg = std::string(what) + ": " + lib->GetErrorString(r);
    if (comm) (void)lib->CommAbort(comm);
    return Status::Unavailable(std::move(msg));
  }
  if (!comm) return Status::Internal(std::string(what) + " returned no communicator");
  // The object owns the communicator from here on, so every failure below
  // aborts it in the destructor.
  std::unique_ptr<NcclComm> owned(new NcclComm(std::move(lib), comm, timeout));
  KH_RETURN_IF_ERROR(owned->Check(r, what));
  return owned;
}

StatusOr<std::unique_ptr<NcclComm>> NcclComm::Create(std::shared_ptr<const NcclLibrary> lib,
                                                     const ncclUniqueId& id, int rank, int size,
                                                     const cuda::CudaStream& stream,
                                                     std::chrono::milliseconds timeout) {
  KH_RETURN_IF_ERROR(stream.Enter());
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t r = lib->CommInitRankConfig(&comm, size, id, rank, &config);
  return Adopt(std::move(lib), comm, r, timeout, "ncclCommInitRankConfig");
}

StatusOr<std::unique_ptr<NcclComm>> NcclComm::Shrink(NcclComm& parent, std::vector<int> exclude,
                                                     bool abort_parent) {
  const NcclLibrary& lib = *parent.lib_;
  if (!lib.CommShrink) return Status::FailedPrecondition(lib.Describe() + " cannot shrink");
  if (!parent.comm_) return Status::FailedPrecondition("the parent communicator was aborted");
  if (parent.revoked_) {
    // Revoke completes asynchronously: the parent is quiescent once its
    // async state leaves ncclInProgress.
    const auto deadline = Clock::now() + parent.timeout_;
    Backoff backoff;
    ncclResult_t state = ncclInProgress;
    while (lib.CommGetAsyncError(parent.comm_, &state) == ncclSuccess && state == ncclInProgress) {
      if (Clock::now() > deadline)
        return Status::Unavailable("ncclCommRevoke did not quiesce in time");
      backoff.Pause();
    }
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t r =
      lib.CommShrink(parent.comm_, exclude.data(), static_cast<int>(exclude.size()), &comm, &config,
                     abort_parent ? kNcclShrinkAbort : kNcclShrinkDefault);
  return Adopt(parent.lib_, comm, r, parent.timeout_, "ncclCommShrink");
}

StatusOr<ncclUniqueId> NcclComm::GrowId() {
  if (!lib_->CommGetUniqueId) return Status::FailedPrecondition(lib_->Describe() + " cannot grow");
  ncclUniqueId id;
  KH_RETURN_IF_ERROR(Check(lib_->CommGetUniqueId(comm_, &id), "ncclCommGetUniqueId"));
  return id;
}

StatusOr<std::unique_ptr<NcclComm>> NcclComm::Grow(std::shared_ptr<const NcclLibrary> lib,
                                                   NcclComm* parent, const ncclUniqueId* id,
                                                   int rank, int size,
                                                   const cuda::CudaStream& stream,
                                                   std::chrono::milliseconds timeout) {
  if (!lib->CommGrow) return Status::FailedPrecondition(lib->Describe() + " cannot grow");
  KH_RETURN_IF_ERROR(stream.Enter());
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t r =
      lib->CommGrow(parent ? parent->comm_ : nullptr, size, id, parent ? -1 : rank, &comm, &config);
  return Adopt(std::move(lib), comm, r, timeout, "ncclCommGrow");
}

NcclComm::~NcclComm() {
  // Abort rather than destroy even on a clean shutdown: ncclCommDestroy may
  // wait for peers that are gone, and abort frees the same resources.
  if (comm_) (void)lib_->CommAbort(comm_);
}

Status NcclComm::Fail(std::string message) {
  if (broken_.ok()) broken_ = Status::Unavailable(std::move(message));
  if (comm_ && lib_->CommRevoke) {
    // Kept for ncclCommShrink: revoking stops its in-flight kernels now, so
    // nothing (cudaFree of a fusion buffer, say) waits for the dead peer.
    if (!revoked_) revoked_ = lib_->CommRevoke(comm_, 0) == ncclSuccess;
    if (revoked_) return broken_;
  }
  // Without revoke a kernel may still wait for the dead peer: only an abort
  // ends it, so the next session forms a new communicator.
  if (comm_) {
    (void)lib_->CommAbort(comm_);
    comm_ = nullptr;
  }
  return broken_;
}

Status NcclComm::Check(ncclResult_t r, const char* what) {
  if (!broken_.ok()) return broken_;
  const auto deadline = Clock::now() + timeout_;
  Backoff backoff;
  while (r == ncclInProgress) {
    if (Clock::now() > deadline) {
      return Fail(std::string(what) + ": not done within " + std::to_string(timeout_.count()) +
                  " ms (KHOROVOD_TIMEOUT_SECONDS); a peer is probably gone");
    }
    backoff.Pause();
    ncclResult_t state = ncclSuccess;
    const ncclResult_t q = lib_->CommGetAsyncError(comm_, &state);
    r = q != ncclSuccess ? q : state;
  }
  if (r != ncclSuccess) return Fail(std::string(what) + ": " + Error(r));
  return Status::Ok();
}

Status NcclComm::WaitForStream(const cuda::CudaStream& stream, const char* what) {
  if (!broken_.ok()) return broken_;
  if (Status s = cuda::FromCuda(cudaEventRecord(stream.done(), stream.get()), "cudaEventRecord");
      !s.ok()) {
    return Fail(s.message());
  }
  const auto deadline = Clock::now() + timeout_;
  Backoff backoff;
  while (true) {
    const cudaError_t e = cudaEventQuery(stream.done());
    if (e == cudaSuccess) return Status::Ok();
    if (e != cudaErrorNotReady)
      return Fail(std::string(what) + ": " + cuda::FromCuda(e, "cudaEventQuery").message());
    ncclResult_t state = ncclSuccess;
    const ncclResult_t q = lib_->CommGetAsyncError(comm_, &state);
    if (q != ncclSuccess || (state != ncclSuccess && state != ncclInProgress)) {
      return Fail(std::string(what) + ": " + Error(q != ncclSuccess ? q : state));
    }
    if (Clock::now() > deadline) {
      return Fail(std::string(what) + ": not complete within " + std::to_string(timeout_.count()) +
                  " ms (KHOROVOD_TIMEOUT_SECONDS); a peer is probably gone");
    }
    backoff.Pause();
  }
}

StatusOr<ncclDataType_t> ToNccl(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBFloat16:
      return ncclBfloat16;
    case DataType::kInt8:
      return ncclInt8;
    case DataType::kUInt8:
      return ncclUint8;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kInt16:
    case DataType::kBool:
      break;  // no NCCL type (as in Horovod); the staging backend moves them
  }
  return Status::InvalidArgument("NCCL has no type for dtype " +
                                 std::to_string(static_cast<int>(dtype)));
}

StatusOr<ncclRedOp_t> ToNccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAverage:
      return ncclAvg;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kProduct:
      return ncclProd;
    case ReduceOp::kAdasum:
      break;  // host only (core/adasum.h)
  }
  return Status::InvalidArgument("NCCL has no reduction for op " +
                                 std::to_string(static_cast<int>(op)));
}

}  // namespace khorovod
