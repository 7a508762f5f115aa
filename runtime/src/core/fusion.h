// Tensor fusion: which allreduce responses share one buffer.
//
// PlanFusion walks the round's responses in order and, for each allreduce
// not yet placed, collects every later allreduce with the same dtype, op,
// scaling and device while the total stays within the threshold. Other
// operations run alone. The plan is a pure function of the responses, so
// every rank computes the same one.
//
// Thread-safety: pure function.
#pragma once

#include <cstddef>
#include <vector>

#include "core/message.h"

namespace khorovod {

// Each inner vector is the list of indices into `responses` that execute
// together, in execution order.
std::vector<std::vector<size_t>> PlanFusion(const std::vector<Response>& responses,
                                            size_t threshold_bytes);

}  // namespace khorovod
