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

std::string NcclError(ncclResult_t r, ncclComm_t comm) {
  std::string msg = ncclGetErrorString(r);
  if (comm) {
    if (const char* last = ncclGetLastError(comm); last && *last) msg += std::string(": ") + last;
  }
  return msg;
}

}  // namespace

StatusOr<std::unique_ptr<NcclComm>> NcclComm::Create(const ncclUniqueId& id, int rank, int size,
                                                     const cuda::CudaStream& stream,
                                                     std::chrono::milliseconds timeout) {
  KH_RETURN_IF_ERROR(stream.Enter());
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (comm) (void)ncclCommAbort(comm);
    return Status::Unavailable("ncclCommInitRankConfig: " + NcclError(r, nullptr));
  }
  // The object owns the communicator from here on, so every failure below
  // aborts it in the destructor.
  std::unique_ptr<NcclComm> owned(new NcclComm(comm, timeout));
  KH_RETURN_IF_ERROR(owned->Check(r, "ncclCommInitRankConfig"));
  return owned;
}

NcclComm::~NcclComm() {
  // Abort rather than destroy even on a clean shutdown: ncclCommDestroy may
  // wait for peers that are gone, and abort frees the same resources.
  if (comm_) (void)ncclCommAbort(comm_);
}

Status NcclComm::Fail(std::string message) {
  if (broken_.ok()) broken_ = Status::Unavailable(std::move(message));
  if (comm_) {
    (void)ncclCommAbort(comm_);
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
    const ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
    r = q != ncclSuccess ? q : state;
  }
  if (r != ncclSuccess) return Fail(std::string(what) + ": " + NcclError(r, comm_));
  return Status::Ok();
}

Status NcclComm::WaitForStream(const cuda::CudaStream& stream, const char* what) {
  if (!broken_.ok()) return broken_;
  if (Status s = cuda::FromCuda(cudaEventRecord(stream.done(), stream.get()), "cudaEventRecord"); !s.ok()) {
    return Fail(s.message());
  }
  const auto deadline = Clock::now() + timeout_;
  Backoff backoff;
  while (true) {
    const cudaError_t e = cudaEventQuery(stream.done());
    if (e == cudaSuccess) return Status::Ok();
    if (e != cudaErrorNotReady) return Fail(std::string(what) + ": " + cuda::FromCuda(e, "cudaEventQuery").message());
    ncclResult_t state = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
    if (q != ncclSuccess || (state != ncclSuccess && state != ncclInProgress)) {
      return Fail(std::string(what) + ": " + NcclError(q != ncclSuccess ? q : state, comm_));
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
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
    case DataType::kFloat16: return ncclFloat16;
    case DataType::kBFloat16: return ncclBfloat16;
    case DataType::kInt8: return ncclInt8;
    case DataType::kUInt8: return ncclUint8;
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
    case DataType::kInt16:
    case DataType::kBool: break;  // no NCCL type (as in Horovod); the staging backend moves them
  }
  return Status::InvalidArgument("NCCL has no type for dtype " + std::to_string(static_cast<int>(dtype)));
}

StatusOr<ncclRedOp_t> ToNccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAverage: return ncclAvg;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kProduct: return ncclProd;
    case ReduceOp::kAdasum: break;  // host only (core/adasum.h)
  }
  return Status::InvalidArgument("NCCL has no reduction for op " + std::to_string(static_cast<int>(op)));
}

}  // namespace khorovod
