#include "core/adasum.h"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/enforce.h"
#include "common/half.h"

namespace khorovod {
namespace {

// A region [offset, offset + count) of the tensor, in elements.
struct Region {
  size_t offset = 0;
  size_t count = 0;
};

double Load(const void* p, size_t i, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
      return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
    case DataType::kFloat32:
      return static_cast<const float*>(p)[i];
    default:
      return static_cast<const double*>(p)[i];
  }
}

// data[i] = ca * data[i] + cb * other[i], in the element type (float for
// float16), the same expression on both ranks of a pair so they agree.
void ScaledAdd(void* data, const void* other, size_t count, DataType dtype, double ca, double cb) {
  if (dtype == DataType::kFloat64) {
    auto* a = static_cast<double*>(data);
    const auto* b = static_cast<const double*>(other);
    for (size_t i = 0; i < count; ++i) a[i] = ca * a[i] + cb * b[i];
  } else if (dtype == DataType::kFloat32) {
    auto* a = static_cast<float*>(data);
    const auto* b = static_cast<const float*>(other);
    const auto fa = static_cast<float>(ca), fb = static_cast<float>(cb);
    for (size_t i = 0; i < count; ++i) a[i] = fa * a[i] + fb * b[i];
  } else {
    auto* a = static_cast<uint16_t*>(data);
    const auto* b = static_cast<const uint16_t*>(other);
    const auto fa = static_cast<float>(ca), fb = static_cast<float>(cb);
    for (size_t i = 0; i < count; ++i)
      a[i] = FloatToHalf(fa * HalfToFloat(a[i]) + fb * HalfToFloat(b[i]));
  }
}

// The weight of a vector with squared norm `sq` in a pair whose dot product
// is `dot`; 1 below sqrt(DBL_MIN), where the quotient means nothing.
double Coefficient(double dot, double sq) {
  static const double kTiny = std::sqrt(DBL_MIN);
  return sq >= kTiny ? 1.0 - dot / sq * 0.5 : 1.0;
}

// Sends `send` elements from `send_at` to `peer` and receives `recv`
// elements from it into `recv_at`: an Alltoallv in which every other count
// is zero, so any backend's collective serves as the pairwise exchange.
Status Exchange(Backend& backend, int size, int peer, const std::byte* send_at, size_t send,
                std::byte* recv_at, size_t recv, DataType dtype) {
  std::vector<int64_t> send_counts(size, 0), recv_counts(size, 0);
  send_counts[peer] = static_cast<int64_t>(send);
  recv_counts[peer] = static_cast<int64_t>(recv);
  return backend.Alltoallv(send_at, send_counts, recv_at, recv_counts, dtype);
}

// One level of the halving: exchanges halves with rank ^ level, then
// combines this rank's half with the neighbour's copy of it.
Status ReduceLevel(Backend& backend, std::byte* base, std::vector<std::byte>& scratch,
                   DataType dtype, int rank, int size, int level, Region* mine) {
  const size_t esize = DataTypeSize(dtype);
  const bool lower = (rank & level) == 0;
  const size_t first = mine->count / 2, second = mine->count - first;
  const Region keep = lower ? Region{mine->offset, first} : Region{mine->offset + first, second};
  const Region give = lower ? Region{mine->offset + first, second} : Region{mine->offset, first};
  scratch.resize(keep.count * esize);
  KH_RETURN_IF_ERROR(Exchange(backend, size, rank ^ level, base + give.offset * esize, give.count,
                              scratch.data(), keep.count, dtype));
  const std::byte* own = base + keep.offset * esize;
  // Slots per group of 2*level ranks: a.b, |lower's|^2, |upper's|^2.
  std::vector<double> sums(3 * static_cast<size_t>(size / (2 * level)), 0.0);
  double* slot = &sums[3 * static_cast<size_t>(rank / (2 * level))];
  for (size_t i = 0; i < keep.count; ++i) {
    const double x = Load(own, i, dtype), y = Load(scratch.data(), i, dtype);
    slot[0] += x * y;
    slot[lower ? 1 : 2] += x * x;
    slot[lower ? 2 : 1] += y * y;
  }
  KH_RETURN_IF_ERROR(
      backend.Allreduce(sums.data(), sums.data(), sums.size(), DataType::kFloat64, ReduceOp::kSum));
  const double dot = slot[0];
  const double own_sq = lower ? slot[1] : slot[2], other_sq = lower ? slot[2] : slot[1];
  ScaledAdd(base + keep.offset * esize, scratch.data(), keep.count, dtype, Coefficient(dot, own_sq),
            Coefficient(dot, other_sq));
  *mine = keep;
  return Status::Ok();
}

}  // namespace

bool AdasumSupports(DataType dtype) {
  return dtype == DataType::kFloat16 || dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
}

Status AdasumAllreduce(Backend& backend, void* data, size_t count, DataType dtype, int rank,
                       int size) {
  if (size < 1 || !PowerOfTwo(static_cast<size_t>(size))) {
    return Status::InvalidArgument(
        "Running Adasum with non-power of 2 ranks is not supported yet (" + std::to_string(size) +
        " ranks)");
  }
  if (!AdasumSupports(dtype)) {
    return Status::InvalidArgument("Adasum supports float16, float32 and float64, not " +
                                   std::string(DataTypeName(dtype)));
  }
  auto* base = static_cast<std::byte*>(data);
  const size_t esize = DataTypeSize(dtype);
  std::vector<std::byte> scratch;
  std::vector<Region> regions;  // this rank's region before each level
  Region mine{0, count};
  for (int level = 1; level < size; level <<= 1) {
    regions.push_back(mine);
    KH_RETURN_IF_ERROR(ReduceLevel(backend, base, scratch, dtype, rank, size, level, &mine));
  }
  // Distance halving: at each level the pair's two reduced halves are
  // swapped, so both hold the parent region again.
  for (int level = size >> 1; level > 0; level >>= 1) {
    const Region parent = regions.back();
    regions.pop_back();
    const bool lower = (rank & level) == 0;  // kept the first half at this level
    const Region theirs = lower ? Region{parent.offset + mine.count, parent.count - mine.count}
                                : Region{parent.offset, parent.count - mine.count};
    scratch.resize(theirs.count * esize);
    KH_RETURN_IF_ERROR(Exchange(backend, size, rank ^ level, base + mine.offset * esize, mine.count,
                                scratch.data(), theirs.count, dtype));
    if (theirs.count)
      std::memcpy(base + theirs.offset * esize, scratch.data(), theirs.count * esize);
    mine = parent;
  }
  return Status::Ok();
}

void AdasumTree(const std::vector<void*>& vectors, size_t count, DataType dtype) {
  const size_t n = vectors.size();
  KH_ENFORCE(PowerOfTwo(n), "AdasumTree needs a power-of-two number of vectors");
  KH_ENFORCE(AdasumSupports(dtype), "AdasumTree: unsupported dtype");
  for (size_t stride = 1; stride < n; stride <<= 1) {
    for (size_t i = 0; i < n; i += 2 * stride) {
      void* a = vectors[i];
      const void* b = vectors[i + stride];
      double dot = 0.0, aa = 0.0, bb = 0.0;
      for (size_t k = 0; k < count; ++k) {
        const double x = Load(a, k, dtype), y = Load(b, k, dtype);
        dot += x * y;
        aa += x * x;
        bb += y * y;
      }
      ScaledAdd(a, b, count, dtype, Coefficient(dot, aa), Coefficient(dot, bb));
    }
  }
}

}  // namespace khorovod
