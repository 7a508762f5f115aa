#include "backend/staging/staging_backend.h"

#include <numeric>

#include "common/enforce.h"
#include "common/reduce_kernels.h"

namespace khorovod {
namespace {

int64_t Sum(const std::vector<int64_t>& counts) {
  return std::accumulate(counts.begin(), counts.end(), int64_t{0});
}

}  // namespace

StagingBackend::StagingBackend(std::unique_ptr<Backend> host, std::unique_ptr<DeviceCopier> copier,
                               int rank, int size)
    : host_(std::move(host)), copier_(std::move(copier)), rank_(rank), size_(size) {
  KH_ENFORCE(host_ && copier_, "staging backend needs a host backend and a copier");
  KH_ENFORCE(host_->SupportsDevice(Device{}),
             "staging backend's inner backend must work on host memory");
}

std::byte* StagingBackend::Input(size_t bytes) {
  if (input_.size() < bytes) input_.resize(bytes);
  return input_.data();
}

std::byte* StagingBackend::Output(size_t bytes) {
  if (output_.size() < bytes) output_.resize(bytes);
  return output_.data();
}

Status StagingBackend::Allreduce(const void* in, void* out, size_t count, DataType dtype,
                                 ReduceOp op) {
  const size_t bytes = count * DataTypeSize(dtype);
  std::byte* host = Input(bytes);
  if (bytes) KH_RETURN_IF_ERROR(copier_->ToHost(host, in, bytes));
  KH_RETURN_IF_ERROR(host_->Allreduce(host, host, count, dtype, op));
  if (bytes) KH_RETURN_IF_ERROR(copier_->ToDevice(out, host, bytes));
  return Status::Ok();
}

template <typename Before, typename After>
Status StagingBackend::ReduceStaged(const std::vector<Span>& spans, DataType dtype, ReduceOp op,
                                    Before&& before, After&& after) {
  // Every span goes back to back into one host buffer, which the host
  // backend reduces as one: fusion survives staging.
  const size_t esize = DataTypeSize(dtype);
  size_t total = 0;
  for (const Span& s : spans) total += s.count;
  std::byte* host = Input(total * esize);
  size_t offset = 0;
  for (const Span& s : spans) {
    if (s.count) KH_RETURN_IF_ERROR(copier_->ToHost(host + offset, s.data, s.count * esize));
    offset += s.count * esize;
  }
  before(host, total);
  KH_RETURN_IF_ERROR(host_->AllreduceSpans({Span{host, total}}, dtype, op));
  after(host, total);
  offset = 0;
  for (const Span& s : spans) {
    if (s.count) KH_RETURN_IF_ERROR(copier_->ToDevice(s.data, host + offset, s.count * esize));
    offset += s.count * esize;
  }
  return Status::Ok();
}

Status StagingBackend::AllreduceSpans(const std::vector<Span>& spans, DataType dtype, ReduceOp op) {
  // kAverage stays a sum here: the caller divides (AveragesNatively() is false).
  return ReduceStaged(
      spans, dtype, op, [](std::byte*, size_t) {}, [](std::byte*, size_t) {});
}

StatusOr<std::shared_ptr<void>> StagingBackend::Allocate(size_t bytes) {
  if (bytes == 0) return std::shared_ptr<void>();
  return copier_->Allocate(bytes);
}

Status StagingBackend::Copy(void* dst, const void* src, size_t bytes) {
  return bytes ? copier_->Copy(dst, src, bytes) : Status::Ok();
}

Status StagingBackend::Zero(void* dst, size_t bytes) {
  return bytes ? copier_->Zero(dst, bytes) : Status::Ok();
}

Status StagingBackend::ToHost(void* host, const void* device, size_t bytes) {
  return bytes ? copier_->ToHost(host, device, bytes) : Status::Ok();
}

Status StagingBackend::ToDevice(void* device, const void* host, size_t bytes) {
  return bytes ? copier_->ToDevice(device, host, bytes) : Status::Ok();
}

Status StagingBackend::AllreduceScaled(const std::vector<Span>& spans, DataType dtype, ReduceOp op,
                                       double prescale, double postscale) {
  // The same arithmetic, in the same order, as the executor's host path.
  return ReduceStaged(
      spans, dtype, op, [&](std::byte* host, size_t count) { Scale(host, count, dtype, prescale); },
      [&](std::byte* host, size_t count) {
        if (op == ReduceOp::kAverage) Divide(host, count, dtype, size_);
        Scale(host, count, dtype, postscale);
      });
}

Status StagingBackend::Allgatherv(const void* in, void* out, const std::vector<size_t>& counts,
                                  DataType dtype) {
  if (rank_ < 0 || static_cast<size_t>(rank_) >= counts.size()) {
    return Status::Internal("allgather counts have " + std::to_string(counts.size()) +
                            " entries; this rank is " + std::to_string(rank_));
  }
  const size_t esize = DataTypeSize(dtype);
  const size_t mine = counts[rank_] * esize;
  size_t total = 0;
  for (size_t c : counts) total += c * esize;
  std::byte* host_in = Input(mine);
  std::byte* host_out = Output(total);
  if (mine) KH_RETURN_IF_ERROR(copier_->ToHost(host_in, in, mine));
  KH_RETURN_IF_ERROR(host_->Allgatherv(host_in, host_out, counts, dtype));
  if (total) KH_RETURN_IF_ERROR(copier_->ToDevice(out, host_out, total));
  return Status::Ok();
}

Status StagingBackend::Broadcast(void* buffer, size_t count, DataType dtype, int root) {
  const size_t bytes = count * DataTypeSize(dtype);
  std::byte* host = Input(bytes);
  // Only the root's bytes matter going in, and the root's buffer does not
  // change coming out.
  if (rank_ == root && bytes) KH_RETURN_IF_ERROR(copier_->ToHost(host, buffer, bytes));
  KH_RETURN_IF_ERROR(host_->Broadcast(host, count, dtype, root));
  if (rank_ != root && bytes) KH_RETURN_IF_ERROR(copier_->ToDevice(buffer, host, bytes));
  return Status::Ok();
}

Status StagingBackend::Alltoallv(const void* in, const std::vector<int64_t>& send_counts, void* out,
                                 const std::vector<int64_t>& recv_counts, DataType dtype) {
  const size_t esize = DataTypeSize(dtype);
  const size_t send_bytes = static_cast<size_t>(Sum(send_counts)) * esize;
  const size_t recv_bytes = static_cast<size_t>(Sum(recv_counts)) * esize;
  std::byte* host_in = Input(send_bytes);
  std::byte* host_out = Output(recv_bytes);
  if (send_bytes) KH_RETURN_IF_ERROR(copier_->ToHost(host_in, in, send_bytes));
  KH_RETURN_IF_ERROR(host_->Alltoallv(host_in, send_counts, host_out, recv_counts, dtype));
  if (recv_bytes) KH_RETURN_IF_ERROR(copier_->ToDevice(out, host_out, recv_bytes));
  return Status::Ok();
}

Status StagingBackend::Barrier() { return host_->Barrier(); }

}  // namespace khorovod
