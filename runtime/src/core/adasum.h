// Adasum: Horovod's adaptive summation (horovod/common/ops/adasum/adasum.h)
// of one host tensor over all ranks, written once over the Backend's
// primitives (Alltoallv for the pairwise exchanges, a float64 Allreduce for
// the dot products), so every host backend runs the same protocol.
//
// The algorithm, for a power-of-two world size n: recursive vector halving
// with distance doubling. At level L = 1, 2, 4, ... < n, rank r and its
// neighbour r ^ L split their current region in two; the lower rank keeps
// the first half, the upper the second, and each receives the neighbour's
// copy of the half it keeps. With a the lower rank's half and b the upper's,
// and the dot products a.b, |a|^2, |b|^2 taken over the whole vectors that
// the 2L ranks of the group hold in pieces (summed across the group), each
// half becomes
//     a' = (1 - a.b / (2|a|^2)) a + (1 - a.b / (2|b|^2)) b
// (a coefficient stays 1 when its norm is below sqrt(DBL_MIN), as in
// Horovod). Then distance halving gathers the reduced regions back, so
// every rank ends with the whole result. float16/32/64 are supported; dot
// products are in double, float16 is combined in float.
//
// Thread-safety: called from the runtime's background thread only, the same
// call in the same order on every rank, like any Backend call.
#pragma once

#include <cstddef>
#include <vector>

#include "backend/backend.h"
#include "khorovod/dtype.h"
#include "khorovod/status.h"

namespace khorovod {

// Whether Adasum can reduce `dtype` (float16, float32, float64).
bool AdasumSupports(DataType dtype);
// Whether `n` ranks, hosts or vectors can be paired level by level.
inline bool PowerOfTwo(size_t n) { return n > 0 && (n & (n - 1)) == 0; }

// Reduces `count` elements at `data` in place over the backend's ranks
// (`rank` of `size`). kInvalidArgument, the same on every rank, when size
// is not a power of two or the dtype is not supported; transport errors as
// the backend returns them.
Status AdasumAllreduce(Backend& backend, void* data, size_t count, DataType dtype, int rank,
                       int size);

// Horovod's tree of pairwise combinations, computed locally over whole
// vectors: vectors[i] and vectors[i + 1] combine into vectors[i] for even i,
// then vectors[i] and vectors[i + 2] for i a multiple of 4, and so on; the
// result is left in vectors[0] (every even-indexed vector is overwritten). It is the
// reduction AdasumAllreduce distributes, with the same arithmetic (dot
// products in double, each pair combined in the element type), so equal
// inputs give equal bytes on every rank. `vectors.size()` must be a power of
// two and `dtype` supported (enforced).
void AdasumTree(const std::vector<void*>& vectors, size_t count, DataType dtype);

}  // namespace khorovod
