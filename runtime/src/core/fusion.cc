#include "core/fusion.h"

#include <algorithm>

namespace khorovod {
namespace {

bool Fusible(const Response& a, const Response& b) {
  return b.op == OpType::kAllreduce && b.kind == Response::Kind::kExecute && a.dtype == b.dtype && a.reduce_op == b.reduce_op &&
         a.prescale == b.prescale && a.postscale == b.postscale && a.device == b.device;
}

size_t Bytes(const Response& r) { return static_cast<size_t>(r.total_elements()) * DataTypeSize(r.dtype); }

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

Shape WithFirstDim(int64_t rows, const Shape& like) {
  Shape s = like;
  if (s.empty()) s.push_back(rows);
  else s[0] = rows;
  return s;
}

RowRange ReducescatterRows(int64_t total_rows, int size, int rank) {
  const int64_t base = total_rows / size, extra = total_rows % size;
  return {rank * base + std::min<int64_t>(rank, extra), base + (rank < extra ? 1 : 0)};
}

}  // namespace khorovod
