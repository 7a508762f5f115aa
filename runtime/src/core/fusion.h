// Tensor fusion: which allreduce responses share one buffer.
//
// PlanFusion walks the round's responses in order and, for each allreduce
// not yet placed, collects every later allreduce with the same dtype, op,
// scaling and device while the total stays within the threshold. Other
// operations run alone. The plan is a pure function of the responses, so
// every rank computes the same one.
//
// Also the layout rules both executor paths (host and device) share.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/message.h"

namespace khorovod {

// Each inner vector is the list of indices into `responses` that execute
// together, in execution order.
std::vector<std::vector<size_t>> PlanFusion(const std::vector<Response>& responses,
                                            size_t threshold_bytes);

// In a fused allreduce, tensors below this size are cheaper to copy into the
// fusion buffer than to reduce as their own span.
inline constexpr size_t kPackBelowBytes = 64 << 10;

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
