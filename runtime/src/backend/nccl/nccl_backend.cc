#include "backend/nccl/nccl_backend.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_status.h"
#include "backend/gloo/gloo_ops.h"
#include "backend/nccl/nccl_comm.h"
#include "backend/nccl/nccl_scaling.h"
#include "common/reduce_kernels.h"

namespace khorovod {
namespace {

// Device memory that grows on demand (the barrier's scratch word).
// cudaFree synchronizes the device, so it is kept for the backend's
// lifetime rather than shrunk.
class DeviceBuffer {
 public:
  ~DeviceBuffer() {
    if (data_) (void)cudaFree(data_);
  }
  StatusOr<std::byte*> Reserve(size_t bytes) {
    if (bytes <= size_) return data_;
    if (data_) KH_CUDA_RETURN_IF_ERROR(cudaFree(data_));
    data_ = nullptr;
    size_ = 0;
    void* p = nullptr;
    KH_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
    data_ = static_cast<std::byte*>(p);
    size_ = bytes;
    return data_;
  }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

class NcclBackend final : public Backend, public DeviceOps {
 public:
  NcclBackend(std::unique_ptr<cuda::CudaStream> stream, std::unique_ptr<NcclComm> comm, int rank, int size)
      : stream_(std::move(stream)), comm_(std::move(comm)), rank_(rank), size_(size) {}

  ~NcclBackend() override {
    // The communicator aborts first, so no kernel still reads the buffers
    // that the members destroyed after it free.
    comm_.reset();
  }

  std::string_view name() const override { return "nccl"; }
  bool SupportsDevice(const Device& d) const override {
    return d.kind == DeviceKind::kCUDA && d.index == stream_->device();
  }
  bool AveragesNatively() const override { return true; }
  DeviceOps* device_ops() override { return this; }

  Status Allreduce(const void* in, void* out, size_t count, DataType dtype, ReduceOp op) override {
    KH_RETURN_IF_ERROR(Enter());
    auto type = ToNccl(dtype);
    auto red = ToNccl(op);
    if (!type.ok()) return type.status();
    if (!red.ok()) return red.status();
    if (size_ == 1) {  // every reduction of one rank is the identity (see AllreduceScaled)
      if (count > 0 && in != out) KH_RETURN_IF_ERROR(Copy(out, in, count * DataTypeSize(dtype)));
      return comm_->WaitForStream(*stream_, "allreduce");
    }
    KH_RETURN_IF_ERROR(comm_->Check(ncclAllReduce(in, out, count, *type, *red, comm_->get(), stream_->get()),
                                    "ncclAllReduce"));
    return comm_->WaitForStream(*stream_, "allreduce");
  }

  Status AllreduceSpans(const std::vector<Span>& spans, DataType dtype, ReduceOp op) override {
    return AllreduceScaled(spans, dtype, op, 1.0, 1.0);
  }

  // --- DeviceOps: all on the backend's stream, in call order ----------------
  StatusOr<std::shared_ptr<void>> Allocate(size_t bytes) override {
    return cuda::AllocateOn(stream_->device(), bytes);
  }
  Status Copy(void* dst, const void* src, size_t bytes) override {
    KH_RETURN_IF_ERROR(Enter());
    KH_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_->get()));
    return Status::Ok();
  }
  Status Zero(void* dst, size_t bytes) override {
    KH_RETURN_IF_ERROR(Enter());
    KH_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dst, 0, bytes, stream_->get()));
    return Status::Ok();
  }
  Status Flush() override {
    KH_RETURN_IF_ERROR(Enter());
    return comm_->WaitForStream(*stream_, "device copies");
  }

  // The spans arrive packed (core/fusion.h): one ncclAllReduce each, in
  // one group, in place.
  Status AllreduceScaled(const std::vector<Span>& spans, DataType dtype, ReduceOp op, double prescale,
                         double postscale) override {
    KH_RETURN_IF_ERROR(Enter());
    auto type = ToNccl(dtype);
    if (!type.ok()) return type.status();
    auto scaled = ScaledRedOp::Create(*comm_, dtype, op, prescale, postscale, size_);
    if (!scaled.ok()) return scaled.status();
    // At one rank NCCL runs a kernel of its own (oneRankReduce) for averages
    // and PreMulSum, and NCCL 2.28.9's leaves the last element of some
    // buffers unwritten (seen on an H200: NcclGpu.AveragedAndScaledEveryCount).
    // One rank's reduction is its input times the factor, so the backend
    // does that itself, after the same validation.
    if (size_ == 1) return ScaleOneRank(spans, dtype, prescale * postscale);
    const ncclRedOp_t red = scaled->get();
    KH_RETURN_IF_ERROR(comm_->Check(ncclGroupStart(), "ncclGroupStart"));
    ncclResult_t r = ncclSuccess;
    for (const Span& s : spans) {
      if (r != ncclSuccess && r != ncclInProgress) break;
      if (s.count == 0) continue;
      r = ncclAllReduce(s.data, s.data, s.count, *type, red, comm_->get(), stream_->get());
    }
    // The group must be closed whatever happened inside it.
    const ncclResult_t end = ncclGroupEnd();
    KH_RETURN_IF_ERROR(comm_->Check(r != ncclSuccess && r != ncclInProgress ? r : end, "fused ncclAllReduce"));
    return comm_->WaitForStream(*stream_, "fused allreduce");
  }

  Status Allgatherv(const void* in, void* out, const std::vector<size_t>& counts, DataType dtype) override {
    KH_RETURN_IF_ERROR(Enter());
    auto type = ToNccl(dtype);
    if (!type.ok()) return type.status();
    if (counts.size() != static_cast<size_t>(size_)) {
      return Status::Internal("allgather has " + std::to_string(counts.size()) + " counts for " +
                              std::to_string(size_) + " ranks");
    }
    const size_t esize = DataTypeSize(dtype);
    if (std::all_of(counts.begin(), counts.end(), [&](size_t c) { return c == counts.front(); })) {
      KH_RETURN_IF_ERROR(comm_->Check(
          ncclAllGather(in, out, counts.front(), *type, comm_->get(), stream_->get()), "ncclAllGather"));
      return comm_->WaitForStream(*stream_, "allgather");
    }
    // Unequal shares: one broadcast per rank, all in one group (NCCL's
    // allgather needs equal counts).
    KH_RETURN_IF_ERROR(comm_->Check(ncclGroupStart(), "ncclGroupStart"));
    ncclResult_t r = ncclSuccess;
    size_t offset = 0;
    for (int root = 0; root < size_ && (r == ncclSuccess || r == ncclInProgress); ++root) {
      std::byte* dst = static_cast<std::byte*>(out) + offset;
      r = ncclBroadcast(root == rank_ ? in : dst, dst, counts[root], *type, root, comm_->get(), stream_->get());
      offset += counts[root] * esize;
    }
    const ncclResult_t end = ncclGroupEnd();
    KH_RETURN_IF_ERROR(comm_->Check(r != ncclSuccess && r != ncclInProgress ? r : end, "allgatherv broadcasts"));
    return comm_->WaitForStream(*stream_, "allgatherv");
  }

  Status Broadcast(void* buffer, size_t count, DataType dtype, int root) override {
    KH_RETURN_IF_ERROR(Enter());
    auto type = ToNccl(dtype);
    if (!type.ok()) return type.status();
    KH_RETURN_IF_ERROR(comm_->Check(
        ncclBroadcast(buffer, buffer, count, *type, root, comm_->get(), stream_->get()), "ncclBroadcast"));
    return comm_->WaitForStream(*stream_, "broadcast");
  }

  Status Alltoallv(const void* in, const std::vector<int64_t>& send_counts, void* out,
                   const std::vector<int64_t>& recv_counts, DataType dtype) override {
    KH_RETURN_IF_ERROR(Enter());
    auto type = ToNccl(dtype);
    if (!type.ok()) return type.status();
    if (send_counts.size() != static_cast<size_t>(size_) || recv_counts.size() != static_cast<size_t>(size_)) {
      return Status::Internal("alltoall counts do not have one entry per rank");
    }
    const size_t esize = DataTypeSize(dtype);
    KH_RETURN_IF_ERROR(comm_->Check(ncclGroupStart(), "ncclGroupStart"));
    ncclResult_t r = ncclSuccess;
    size_t send_off = 0, recv_off = 0;
    for (int peer = 0; peer < size_ && (r == ncclSuccess || r == ncclInProgress); ++peer) {
      const auto send = static_cast<size_t>(send_counts[peer]);
      const auto recv = static_cast<size_t>(recv_counts[peer]);
      if (send) {
        r = ncclSend(static_cast<const std::byte*>(in) + send_off, send, *type, peer, comm_->get(), stream_->get());
      }
      if (recv && (r == ncclSuccess || r == ncclInProgress)) {
        r = ncclRecv(static_cast<std::byte*>(out) + recv_off, recv, *type, peer, comm_->get(), stream_->get());
      }
      send_off += send * esize;
      recv_off += recv * esize;
    }
    const ncclResult_t end = ncclGroupEnd();
    KH_RETURN_IF_ERROR(comm_->Check(r != ncclSuccess && r != ncclInProgress ? r : end, "alltoallv send/recv"));
    return comm_->WaitForStream(*stream_, "alltoallv");
  }

  Status Barrier() override {
    // A one-element allreduce: NCCL has no barrier of its own.
    KH_RETURN_IF_ERROR(Enter());
    auto scratch = barrier_.Reserve(sizeof(int32_t));
    if (!scratch.ok()) return scratch.status();
    KH_RETURN_IF_ERROR(comm_->Check(
        ncclAllReduce(*scratch, *scratch, 1, ncclInt32, ncclSum, comm_->get(), stream_->get()), "barrier"));
    return comm_->WaitForStream(*stream_, "barrier");
  }

 private:
  // In place: nothing for a factor of 1, else each span goes to the host,
  // is scaled by the host kernels (as the staging backend does) and back.
  Status ScaleOneRank(const std::vector<Span>& spans, DataType dtype, double factor) {
    if (factor != 1.0) {
      const size_t esize = DataTypeSize(dtype);
      for (const Span& s : spans) {
        if (s.count == 0) continue;
        one_rank_host_.resize(s.count * esize);
        KH_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(one_rank_host_.data(), s.data, s.count * esize,
                                                cudaMemcpyDeviceToHost, stream_->get()));
        KH_RETURN_IF_ERROR(comm_->WaitForStream(*stream_, "copy to host"));
        Scale(one_rank_host_.data(), s.count, dtype, factor);
        KH_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s.data, one_rank_host_.data(), s.count * esize,
                                                cudaMemcpyHostToDevice, stream_->get()));
        KH_RETURN_IF_ERROR(comm_->WaitForStream(*stream_, "copy from host"));
      }
    }
    return comm_->WaitForStream(*stream_, "allreduce");
  }

  Status Enter() {
    if (comm_->broken()) return comm_->Check(ncclSuccess, "nccl");  // the stored failure
    return stream_->Enter();
  }

  // Declared before comm_ so that they are destroyed after it.
  std::unique_ptr<cuda::CudaStream> stream_;
  DeviceBuffer barrier_;
  std::unique_ptr<NcclComm> comm_;
  int rank_;
  int size_;
  std::vector<std::byte> one_rank_host_;  // ScaleOneRank's host copy, kept between calls
};

}  // namespace

StatusOr<std::unique_ptr<Backend>> MakeNcclBackend(const BackendInit& init) {
  if (!init.config) return Status::FailedPrecondition("nccl backend needs a config");
  const Config& config = *init.config;
  if (config.size > 1 && !init.gloo_context) {
    return Status::FailedPrecondition("nccl backend needs a connected Gloo context to share its id");
  }
  auto device = cuda::SelectDevice(config);
  if (!device.ok()) return device.status();
  auto stream = cuda::CudaStream::Create(*device);
  if (!stream.ok()) return stream.status();
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (config.rank == 0) {
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
      return Status::Unavailable(std::string("ncclGetUniqueId: ") + ncclGetErrorString(r));
    }
  }
  if (config.size > 1) {
    // Every rank reaches this point in the same session, so the broadcast
    // pairs up; its Gloo timeout bounds the wait for a missing rank 0.
    KH_RETURN_IF_ERROR(gloo_ops::BroadcastBytes(init.gloo_context, &id, sizeof id, 0));
  }
  auto comm = NcclComm::Create(id, config.rank, config.size, **stream, config.transport_timeout);
  if (!comm.ok()) return comm.status();
  return std::unique_ptr<Backend>(
      std::make_unique<NcclBackend>(std::move(*stream), std::move(*comm), config.rank, config.size));
}

KH_REGISTER_BACKEND(nccl, "nccl", MakeNcclBackend)
KH_REGISTER_DEVICE(nccl, "nccl", cuda::ResolveDevice)

}  // namespace khorovod
