// Tensor fusion: which allreduce responses share one buffer.
//
// PlanFusion walks the round's responses in order and, for each allreduce
// not yet placed, collects every later allreduce with the same dtype, op,
// scaling and device while the total stays within the threshold. Other
// operations run alone. The plan is a pure function of the responses, so
// every rank computes the same one.
//
// LayoutFusedAllreduce is the one packing rule every allreduce path follows
// (the executor's host path, DeviceReducer, and through them every backend,
// which receives its spans already packed).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "core/message.h"
#include "core/tensor_queue.h"

namespace khorovod {

// Each inner vector is the list of indices into `responses` that execute
// together, in execution order.
std::vector<std::vector<size_t>> PlanFusion(const std::vector<Response>& responses,
                                            size_t threshold_bytes);

// In a fused allreduce, tensors below this size are cheaper to copy into the
// fusion buffer than to reduce as their own span.
inline constexpr size_t kPackBelowBytes = 64 << 10;

// Where each member of a fused allreduce is reduced. Members below
// kPackBelowBytes are packed into the fusion buffer, in member order, at
// [0, packed_bytes). A lone member, and every larger one, is reduced where
// it lives: in the caller's output (copied there from the input first), or,
// on a rank without the tensor (it joined), as zeros in a slot of the fusion
// buffer after the packed block. Which members are present changes only
// where this rank keeps its zeros, never the spans' order or sizes, so every
// rank reduces matching spans.
struct FusionLayout {
  enum class Place { kPacked, kInOutput, kZeroSlot };
  struct Member {
    Place place;
    size_t bytes;
    size_t offset;  // into the fusion buffer (kPacked, kZeroSlot)
  };
  std::vector<Member> members;
  size_t packed_bytes = 0;
  size_t buffer_bytes = 0;  // the fusion buffer needed: packed block + zero slots

  // The spans to reduce, in the order every rank uses: each unpacked member
  // (at outputs[i] or its zero slot), then the packed block, if any.
  std::vector<Backend::Span> Spans(std::byte* buffer, const std::vector<void*>& outputs,
                                   size_t esize) const;
};
FusionLayout LayoutFusedAllreduce(const std::vector<size_t>& member_bytes,
                                  const std::vector<bool>& present);

// A fused group's members as the layout functions take them: sizes, and
// this rank's buffers (null where it has no op: it joined).
struct FusedMembers {
  std::vector<size_t> bytes;
  std::vector<bool> present;
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
};
FusedMembers MembersOf(const std::vector<const Response*>& group,
                       const std::vector<std::optional<PendingOp>>& ops);

// Stages a fused allreduce's inputs as `layout` says, with the caller's
// memory operations (host memcpy, or a device backend's DeviceOps):
// copy(dst, src, bytes) and zero(dst, bytes) return Status. inputs[i] and
// outputs[i] are null for a member this rank does not have.
template <typename Copy, typename Zero>
Status PackFusion(const FusionLayout& layout, std::byte* buffer,
                  const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
                  Copy&& copy, Zero&& zero) {
  for (size_t i = 0; i < layout.members.size(); ++i) {
    const FusionLayout::Member& m = layout.members[i];
    if (m.bytes == 0) continue;
    switch (m.place) {
      case FusionLayout::Place::kInOutput:
        if (inputs[i] != outputs[i]) KH_RETURN_IF_ERROR(copy(outputs[i], inputs[i], m.bytes));
        break;
      case FusionLayout::Place::kZeroSlot:
        KH_RETURN_IF_ERROR(zero(buffer + m.offset, m.bytes));
        break;
      case FusionLayout::Place::kPacked:
        if (inputs[i])
          KH_RETURN_IF_ERROR(copy(buffer + m.offset, inputs[i], m.bytes));
        else
          KH_RETURN_IF_ERROR(zero(buffer + m.offset, m.bytes));
        break;
    }
  }
  return Status::Ok();
}

// Copies the reduced packed members back to their outputs.
template <typename Copy>
Status UnpackFusion(const FusionLayout& layout, const std::byte* buffer,
                    const std::vector<void*>& outputs, Copy&& copy) {
  for (size_t i = 0; i < layout.members.size(); ++i) {
    const FusionLayout::Member& m = layout.members[i];
    if (m.place != FusionLayout::Place::kPacked || m.bytes == 0 || !outputs[i]) continue;
    KH_RETURN_IF_ERROR(copy(outputs[i], buffer + m.offset, m.bytes));
  }
  return Status::Ok();
}

// `like` with its first dimension set to `rows` (a scalar becomes [rows]):
// the shape of an allgather, alltoall or reducescatter result.
Shape WithFirstDim(int64_t rows, const Shape& like);

// The rows of a reducescatter's result that `rank` keeps: the first
// total % size ranks get one extra row.
struct RowRange {
  int64_t first = 0;
  int64_t count = 0;
};
RowRange ReducescatterRows(int64_t total_rows, int size, int rank);

}  // namespace khorovod
