// One-hop allreduce: every rank sends its whole buffer to every peer at
// once and reduces all contributions in rank order, so every rank computes
// bit-identical results. It takes one network hop where the ring takes
// 2(n-1), but each rank sends n-1 buffers instead of the ring's 2(n-1)/n of
// one: at 2 ranks both send exactly one buffer, so there the direct
// exchange saves a hop at no cost in bytes; at more ranks it pays only for
// small buffers.
//
// The buffer moves as pieces of at most kDirectPieceBytes; each piece is
// reduced as soon as every peer's copy of it has landed, so reduction
// overlaps the transfer of the pieces behind it. A piece of `out` is written
// only after this rank's sends of that piece (which read `in`, possibly the
// same memory) have completed.
//
// `scratch` holds the peers' contributions (size * bytes); the caller keeps
// it between calls so it is allocated and faulted in once.
//
// Thread-safety: one call at a time per gloo::Context. Errors (a dead peer,
// the context's timeout) come back as kUnavailable. `slot` must be the same
// on every rank for this call and unused by any other call in flight.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/reduce_kernels.h"
#include "khorovod/status.h"

namespace gloo {
class Context;
}

namespace khorovod::gloo_ops {

inline constexpr size_t kDirectPieceBytes = 256 << 10;

Status DirectAllreduce(const std::shared_ptr<gloo::Context>& ctx, const void* in, void* out,
                       size_t count, size_t element_size, ReduceFn reduce, uint64_t slot,
                       std::vector<std::byte>* scratch);

// Which allreduce the Gloo backend runs for a lone buffer of `bytes` at
// `size` ranks: the direct exchange below these bounds, Gloo's ring above.
// Same answer on every rank (it depends on the call alone).
inline constexpr size_t kDirectAllreduceMaxBytes = 16 << 10;
inline constexpr size_t kDirectAllreduceTwoRanksMaxBytes = 2 << 20;
inline bool PreferDirectAllreduce(int size, size_t bytes) {
  return bytes <= (size == 2 ? kDirectAllreduceTwoRanksMaxBytes : kDirectAllreduceMaxBytes);
}

}  // namespace khorovod::gloo_ops
