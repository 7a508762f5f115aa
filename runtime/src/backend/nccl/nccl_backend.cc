#include "backend/nccl/nccl_backend.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_status.h"
#include "backend/nccl/nccl_comm.h"
#include "backend/nccl/nccl_formation.h"
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
  NcclBackend(std::unique_ptr<cuda::CudaStream> stream, std::unique_ptr<NcclComm> comm,
              uint64_t comm_id, int rank, int size)
      : stream_(std::move(stream)),
        comm_(std::move(comm)),
        comm_id_(comm_id),
        rank_(rank),
        size_(size) {}

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

  // The communicator, when it is still alive (healthy or revoked), for the
  // next session to reuse, shrink or grow (nccl_formation.h). Every
  // operation has completed or was revoked, so the buffers this backend
  // frees afterwards are no longer read.
  std::unique_ptr<BackendLegacy> Retire() override {
    if (!comm_ || !comm_->alive()) return nullptr;
    auto legacy = std::make_unique<NcclLegacy>();
    legacy->comm = std::move(comm_);
    legacy->comm_id = comm_id_;
    legacy->rank = rank_;
    legacy->size = size_;
    return legacy;
  }

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
    KH_RETURN_IF_ERROR(
        comm_->Check(lib().AllReduce(in, out, count, *type, *red, comm_->get(), stream_->get()),
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
    KH_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_->get()));
    return Status::Ok();
  }
  Status ToHost(void* host, const void* device, size_t bytes) override {
    KH_RETURN_IF_ERROR(Enter());
    KH_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_->get()));
    return comm_->WaitForStream(*stream_, "a copy to the host");
  }
  Status ToDevice(void* device, const void* host, size_t bytes) override {
    KH_RETURN_IF_ERROR(Enter());
    KH_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_->get()));
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
  Status AllreduceScaled(const std::vector<Span>& spans, DataType dtype, ReduceOp op,
                         double prescale, double postscale) override {
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
    KH_RETURN_IF_ERROR(comm_->Check(lib().GroupStart(), "ncclGroupStart"));
    ncclResult_t r = ncclSuccess;
    for (const Span& s : spans) {
      if (r != ncclSuccess && r != ncclInProgress) break;
      if (s.count == 0) continue;
      r = lib().AllReduce(s.data, s.data, s.count, *type, red, comm_->get(), stream_->get());
    }
    // The group must be closed whatever happened inside it.
    const ncclResult_t end = lib().GroupEnd();
    KH_RETURN_IF_ERROR(
        comm_->Check(r != ncclSuccess && r != ncclInProgress ? r : end, "fused ncclAllReduce"));
    return comm_->WaitForStream(*stream_, "fused allreduce");
  }

  Status Allgatherv(const void* in, void* out, const std::vector<size_t>& counts,
                    DataType dtype) override {
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
          lib().AllGather(in, out, counts.front(), *type, comm_->get(), stream_->get()),
          "ncclAllGather"));
      return comm_->WaitForStream(*stream_, "allgather");
    }
    // Unequal shares: one broadcast per rank, all in one group (NCCL's
    // allgather needs equal counts).
    KH_RETURN_IF_ERROR(comm_->Check(lib().GroupStart(), "ncclGroupStart"));
    ncclResult_t r = ncclSuccess;
    size_t offset = 0;
    for (int root = 0; root < size_ && (r == ncclSuccess || r == ncclInProgress); ++root) {
      std::byte* dst = static_cast<std::byte*>(out) + offset;
      r = lib().Broadcast(root == rank_ ? in : dst, dst, counts[root], *type, root, comm_->get(),
                          stream_->get());
      offset += counts[root] * esize;
    }
    const ncclResult_t end = lib().GroupEnd();
    KH_RETURN_IF_ERROR(
        comm_->Check(r != ncclSuccess && r != ncclInProgress ? r : end, "allgatherv broadcasts"));
    return comm_->WaitForStream(*stream_, "allgatherv");
  }

  Status Broadcast(void* buffer, size_t count, DataType dtype, int root) override {
    KH_RETURN_IF_ERROR(Enter());
    auto type = ToNccl(dtype);
    if (!type.ok()) return type.status();
    KH_RETURN_IF_ERROR(comm_->Check(
        lib().Broadcast(buffer, buffer, count, *type, root, comm_->get(), stream_->get()),
        "ncclBroadcast"));
    return comm_->WaitForStream(*stream_, "broadcast");
  }

  Status Alltoallv(const void* in, const std::vector<int64_t>& send_counts, void* out,
                   const std::vector<int64_t>& recv_counts, DataType dtype) override {
    KH_RETURN_IF_ERROR(Enter());
    auto type = ToNccl(dtype);
    if (!type.ok()) return type.status();
    if (send_counts.size() != static_cast<size_t>(size_) ||
        recv_counts.size() != static_cast<size_t>(size_)) {
      return Status::Internal("alltoall counts do not have one entry per rank");
    }
    const size_t esize = DataTypeSize(dtype);
    KH_RETURN_IF_ERROR(comm_->Check(lib().GroupStart(), "ncclGroupStart"));
    ncclResult_t r = ncclSuccess;
    size_t send_off = 0, recv_off = 0;
    for (int peer = 0; peer < size_ && (r == ncclSuccess || r == ncclInProgress); ++peer) {
      const auto send = static_cast<size_t>(send_counts[peer]);
      const auto recv = static_cast<size_t>(recv_counts[peer]);
      if (send) {
        r = lib().Send(static_cast<const std::byte*>(in) + send_off, send, *type, peer,
                       comm_->get(), stream_->get());
      }
      if (recv && (r == ncclSuccess || r == ncclInProgress)) {
        r = lib().Recv(static_cast<std::byte*>(out) + recv_off, recv, *type, peer, comm_->get(),
                       stream_->get());
      }
      send_off += send * esize;
      recv_off += recv * esize;
    }
    const ncclResult_t end = lib().GroupEnd();
    KH_RETURN_IF_ERROR(
        comm_->Check(r != ncclSuccess && r != ncclInProgress ? r : end, "alltoallv send/recv"));
    return comm_->WaitForStream(*stream_, "alltoallv");
  }

  Status Barrier() override {
    // A one-element allreduce: NCCL has no barrier of its own.
    KH_RETURN_IF_ERROR(Enter());
    auto scratch = barrier_.Reserve(sizeof(int32_t));
    if (!scratch.ok()) return scratch.status();
    KH_RETURN_IF_ERROR(comm_->Check(
        lib().AllReduce(*scratch, *scratch, 1, ncclInt32, ncclSum, comm_->get(), stream_->get()),
        "barrier"));
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
    if (!comm_) return Status::Unavailable("the nccl backend was retired");
    if (comm_->broken()) return comm_->Check(ncclSuccess, "nccl");  // the stored failure
    return stream_->Enter();
  }
  const NcclLibrary& lib() const { return comm_->lib(); }

  // Declared before comm_ so that they are destroyed after it.
  std::unique_ptr<cuda::CudaStream> stream_;
  DeviceBuffer barrier_;
  std::unique_ptr<NcclComm> comm_;
  uint64_t comm_id_;
  int rank_;
  int size_;
  std::vector<std::byte> one_rank_host_;  // ScaleOneRank's host copy, kept between calls
};

}  // namespace

StatusOr<std::unique_ptr<Backend>> MakeNcclBackend(const BackendInit& init) {
  if (!init.config) return Status::FailedPrecondition("nccl backend needs a config");
  const Config& config = *init.config;
  if (config.size > 1 && !init.gloo_context) {
    return Status::FailedPrecondition(
        "nccl backend needs a connected Gloo context to share its id");
  }
  auto device = cuda::SelectDevice(config);
  if (!device.ok()) return device.status();
  auto lib = NcclLibrary::Load(config.nccl_library);
  if (!lib.ok()) return lib.status();
  auto stream = cuda::CudaStream::Create(*device);
  if (!stream.ok()) return stream.status();
  auto formed = FormNcclComm(init, *lib, **stream);
  if (!formed.ok()) return formed.status();
  return std::unique_ptr<Backend>(std::make_unique<NcclBackend>(
      std::move(*stream), std::move(formed->comm), formed->comm_id, config.rank, config.size));
}

StatusOr<std::map<std::string, std::string>> NcclInfo(const Config& config) {
  auto lib = NcclLibrary::Load(config.nccl_library);
  if (!lib.ok()) return lib.status();
  const NcclLibrary& l = **lib;
  auto yn = [](bool b) { return std::string(b ? "1" : "0"); };
  return std::map<std::string, std::string>{
      {"version", l.version().str()},
      {"version_code", std::to_string(l.version().code())},
      {"path", l.path()},
      {"shrink", yn(l.features().shrink)},
      {"grow", yn(l.features().grow)},
      {"revoke", yn(l.features().revoke)},
      {"multi_rank_gpu", yn(l.features().multi_rank_gpu_env)}};
}

KH_REGISTER_BACKEND(nccl, "nccl", MakeNcclBackend)
KH_REGISTER_BACKEND_INFO(nccl, "nccl", NcclInfo)
KH_REGISTER_DEVICE(nccl, "nccl", cuda::ResolveDevice)

}  // namespace khorovod
