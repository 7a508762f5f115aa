#include "core/device_reduce.h"

#include "core/fusion.h"

namespace khorovod {
namespace {

Status CopyIfAny(DeviceOps& device, void* dst, const void* src, size_t bytes) {
  return bytes && dst != src ? device.Copy(dst, src, bytes) : Status::Ok();
}

}  // namespace

StatusOr<std::byte*> DeviceReducer::Fusion(DeviceOps& device, size_t bytes) {
  if (bytes > fusion_size_) {
    fusion_.reset();
    fusion_size_ = 0;
    auto memory = device.Allocate(bytes);
    if (!memory.ok()) return memory.status();
    fusion_ = std::move(*memory);
    fusion_size_ = bytes;
  }
  return static_cast<std::byte*>(fusion_.get());
}

void DeviceReducer::TrimFusion() {
  if (fusion_size_ > fusion_threshold_) {
    fusion_.reset();
    fusion_size_ = 0;
  }
}

Status DeviceReducer::Allreduce(DeviceOps& device, const std::vector<const Response*>& group,
                                const std::vector<std::optional<PendingOp>>& ops,
                                TimePoint* packed_at, TimePoint* reduced_at) {
  const Response& head = *group.front();
  const size_t esize = DataTypeSize(head.dtype);
  const FusedMembers members = MembersOf(group, ops);
  const FusionLayout layout = LayoutFusedAllreduce(members.bytes, members.present);
  auto buffer = Fusion(device, layout.buffer_bytes);
  if (!buffer.ok()) return buffer.status();
  auto copy = [&](void* dst, const void* src, size_t bytes) {
    return device.Copy(dst, src, bytes);
  };
  auto zero = [&](void* dst, size_t bytes) { return device.Zero(dst, bytes); };
  KH_RETURN_IF_ERROR(PackFusion(layout, *buffer, members.inputs, members.outputs, copy, zero));
  *packed_at = std::chrono::steady_clock::now();
  Status s = device.AllreduceScaled(layout.Spans(*buffer, members.outputs, esize), head.dtype,
                                    head.reduce_op, head.prescale, head.postscale);
  *reduced_at = std::chrono::steady_clock::now();
  if (s.ok()) s = UnpackFusion(layout, *buffer, members.outputs, copy);
  // Whatever happened, nothing may still be running on the user's buffers
  // when their handles complete.
  Status flushed = device.Flush();
  if (s.ok()) s = flushed;
  TrimFusion();
  return s;
}

Status DeviceReducer::Reducescatter(DeviceOps& device, const Response& r, PendingOp& op) {
  const int64_t total_rows = r.sizes.front();
  const size_t esize = DataTypeSize(r.dtype);
  const size_t bytes = static_cast<size_t>(total_rows * r.row_elements) * esize;
  auto buffer = Fusion(device, bytes);
  if (!buffer.ok()) return buffer.status();
  KH_RETURN_IF_ERROR(CopyIfAny(device, *buffer, op.input.data, bytes));
  Status s = device.AllreduceScaled({Backend::Span{*buffer, bytes / esize}}, r.dtype, r.reduce_op,
                                    r.prescale, r.postscale);
  const RowRange mine = ReducescatterRows(total_rows, size_, rank_);
  const size_t my_bytes = static_cast<size_t>(mine.count * r.row_elements) * esize;
  std::shared_ptr<void> result;
  if (s.ok()) {
    auto memory = device.Allocate(my_bytes);
    if (memory.ok())
      result = std::move(*memory);
    else
      s = memory.status();
  }
  if (s.ok()) {
    s = CopyIfAny(device, result.get(),
                  *buffer + static_cast<size_t>(mine.first * r.row_elements) * esize, my_bytes);
  }
  Status flushed = device.Flush();
  if (s.ok()) s = flushed;
  TrimFusion();
  if (!s.ok()) return s;
  op.completion->SetOutput(Tensor::OnDevice(r.dtype, WithFirstDim(mine.count, op.request.shape),
                                            op.input.device, std::move(result)));
  return Status::Ok();
}

}  // namespace khorovod
