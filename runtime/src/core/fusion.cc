#include "core/fusion.h"

#include <algorithm>

namespace khorovod {
namespace {

bool Fusible(const Response& a, const Response& b) {
  // Adasum's coefficients are per tensor, so its tensors run alone.
  if (a.reduce_op == ReduceOp::kAdasum) return false;
  return b.op == OpType::kAllreduce && b.kind == Response::Kind::kExecute && a.dtype == b.dtype &&
         a.reduce_op == b.reduce_op && a.prescale == b.prescale && a.postscale == b.postscale &&
         a.device == b.device;
}

size_t Bytes(const Response& r) {
  return static_cast<size_t>(r.total_elements()) * DataTypeSize(r.dtype);
}

}  // namespace

std::vector<std::vector<size_t>> PlanFusion(const std::vector<Response>& responses,
                                            size_t threshold_bytes) {
  std::vector<std::vector<size_t>> plan;
  std::vector<bool> placed(responses.size(), false);
  for (size_t i = 0; i < responses.size(); ++i) {
    if (placed[i]) continue;
    placed[i] = true;
    std::vector<size_t> group{i};
    const Response& head = responses[i];
    if (head.op == OpType::kAllreduce && head.kind == Response::Kind::kExecute) {
      size_t total = Bytes(head);
      for (size_t j = i + 1; j < responses.size() && total < threshold_bytes; ++j) {
        if (placed[j] || !Fusible(head, responses[j])) continue;
        if (total + Bytes(responses[j]) > threshold_bytes) continue;
        total += Bytes(responses[j]);
        placed[j] = true;
        group.push_back(j);
      }
    }
    plan.push_back(std::move(group));
  }
  return plan;
}

FusionLayout LayoutFusedAllreduce(const std::vector<size_t>& member_bytes,
                                  const std::vector<bool>& present) {
  FusionLayout layout;
  const bool lone = member_bytes.size() == 1;
  for (size_t bytes : member_bytes) {
    const bool packed = !lone && bytes < kPackBelowBytes;
    layout.members.push_back(
        {packed ? FusionLayout::Place::kPacked : FusionLayout::Place::kInOutput, bytes,
         packed ? layout.packed_bytes : 0});
    if (packed) layout.packed_bytes += bytes;
  }
  layout.buffer_bytes = layout.packed_bytes;
  for (size_t i = 0; i < layout.members.size(); ++i) {
    FusionLayout::Member& m = layout.members[i];
    if (m.place != FusionLayout::Place::kInOutput || present[i]) continue;
    m.place = FusionLayout::Place::kZeroSlot;
    m.offset = layout.buffer_bytes;
    layout.buffer_bytes += m.bytes;
  }
  return layout;
}

FusedMembers MembersOf(const std::vector<const Response*>& group,
                       const std::vector<std::optional<PendingOp>>& ops) {
  FusedMembers m;
  for (size_t i = 0; i < group.size(); ++i) {
    m.bytes.push_back(static_cast<size_t>(group[i]->total_elements()) *
                      DataTypeSize(group[i]->dtype));
    m.present.push_back(ops[i].has_value());
    m.inputs.push_back(ops[i] ? ops[i]->input.data : nullptr);
    m.outputs.push_back(ops[i] ? ops[i]->output.data : nullptr);
  }
  return m;
}

std::vector<Backend::Span> FusionLayout::Spans(std::byte* buffer, const std::vector<void*>& outputs,
                                               size_t esize) const {
  std::vector<Backend::Span> spans;
  for (size_t i = 0; i < members.size(); ++i) {
    const Member& m = members[i];
    if (m.place == Place::kInOutput)
      spans.push_back({outputs[i], m.bytes / esize});
    else if (m.place == Place::kZeroSlot)
      spans.push_back({buffer + m.offset, m.bytes / esize});
  }
  if (packed_bytes) spans.push_back({buffer, packed_bytes / esize});
  return spans;
}

Shape WithFirstDim(int64_t rows, const Shape& like) {
  Shape s = like;
  if (s.empty())
    s.push_back(rows);
  else
    s[0] = rows;
  return s;
}

RowRange ReducescatterRows(int64_t total_rows, int size, int rank) {
  const int64_t base = total_rows / size, extra = total_rows % size;
  return {rank * base + std::min<int64_t>(rank, extra), base + (rank < extra ? 1 : 0)};
}

}  // namespace khorovod
