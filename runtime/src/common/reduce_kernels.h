// Element-wise reduction and scaling kernels for every DataType on host
// memory. Backends hand these to their transport (Gloo calls them per chunk
// of the ring), and the executor uses Scale for pre/post-scaling.
//
// 16-bit floats are widened to float, combined, and rounded back, so results
// are identical on every rank. Average reduces like Sum; the division happens
// in Scale with factor 1/size.
//
// Thread-safety: pure functions over caller-owned memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "khorovod/dtype.h"
#include "khorovod/ops.h"

namespace khorovod {

// out[i] = a[i] (op) b[i] for i < count; out may alias a or b.
using ReduceFn = void (*)(void* out, const void* a, const void* b, size_t count);

// Never null for a valid dtype and op.
ReduceFn GetReduceFn(DataType dtype, ReduceOp op);

// data[i] *= factor: in the element type for float32/float64 (the factor is
// rounded to it, as Horovod does), in float for 16-bit floats, and in double
// for integers, whose results truncate toward zero.
void Scale(void* data, size_t count, DataType dtype, double factor);

// data[i] /= divisor: exact integer division (toward zero) for integer
// types, floating division otherwise. Used for kAverage.
void Divide(void* data, size_t count, DataType dtype, int64_t divisor);

// Fills `count` elements with the op's identity-free neutral input used by a
// joined rank: zeros, which is what Horovod's join contributes.
void FillZeros(void* data, size_t count, DataType dtype);

}  // namespace khorovod
