// Deterministic per-rank test data and float64 references for collective
// tests. Values are chosen so that sums, minima, maxima and products are
// exact in every dtype (quarter steps in [-2, 2]; powers of two for
// products), which lets tests compare bit for bit except for averages.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/half.h"
#include "khorovod/ops.h"
#include "khorovod/tensor.h"

namespace khorovod::testing {

inline double TestValue(DataType dtype, ReduceOp op, int rank, int64_t i, int seed) {
  const int64_t h = (rank * 7919 + i * 104729 + seed * 1299709) % 1000003;
  if (op == ReduceOp::kProduct) {
    static const double kFloat[] = {-2, -1, -0.5, 0.5, 1, 2};
    static const double kSigned[] = {-2, -1, 1, 2};
    static const double kUnsigned[] = {1, 2};
    if (IsFloatingPoint(dtype)) return kFloat[h % 6];
    if (dtype == DataType::kUInt8) return kUnsigned[h % 2];
    return kSigned[h % 4];
  }
  if (IsFloatingPoint(dtype)) return static_cast<double>(h % 17 - 8) / 4.0;
  if (dtype == DataType::kUInt8) return static_cast<double>(h % 16);
  return static_cast<double>(h % 17 - 8);
}

inline void StoreValue(DataType dtype, void* base, int64_t i, double v) {
  switch (dtype) {
    case DataType::kFloat32:
      static_cast<float*>(base)[i] = static_cast<float>(v);
      break;
    case DataType::kFloat64:
      static_cast<double*>(base)[i] = v;
      break;
    case DataType::kFloat16:
      static_cast<uint16_t*>(base)[i] = FloatToHalf(static_cast<float>(v));
      break;
    case DataType::kBFloat16:
      static_cast<uint16_t*>(base)[i] = FloatToBFloat16(static_cast<float>(v));
      break;
    case DataType::kInt8:
      static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v);
      break;
    case DataType::kUInt8:
      static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v);
      break;
    case DataType::kInt32:
      static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v);
      break;
    case DataType::kInt64:
      static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v);
      break;
    case DataType::kInt16:
      static_cast<int16_t*>(base)[i] = static_cast<int16_t>(v);
      break;
    case DataType::kBool:
      static_cast<bool*>(base)[i] = v != 0;
      break;
  }
}

inline double LoadValue(DataType dtype, const void* base, int64_t i) {
  switch (dtype) {
    case DataType::kFloat32:
      return static_cast<const float*>(base)[i];
    case DataType::kFloat64:
      return static_cast<const double*>(base)[i];
    case DataType::kFloat16:
      return HalfToFloat(static_cast<const uint16_t*>(base)[i]);
    case DataType::kBFloat16:
      return BFloat16ToFloat(static_cast<const uint16_t*>(base)[i]);
    case DataType::kInt8:
      return static_cast<const int8_t*>(base)[i];
    case DataType::kUInt8:
      return static_cast<const uint8_t*>(base)[i];
    case DataType::kInt32:
      return static_cast<const int32_t*>(base)[i];
    case DataType::kInt64:
      return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DataType::kInt16:
      return static_cast<const int16_t*>(base)[i];
    case DataType::kBool:
      return static_cast<const bool*>(base)[i] ? 1.0 : 0.0;
  }
  return NAN;
}

inline Tensor MakeTensor(DataType dtype, Shape shape, ReduceOp op, int rank, int seed) {
  Tensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    StoreValue(dtype, t.data(), i, TestValue(dtype, op, rank, i, seed));
  }
  return t;
}

// Float64 reference of the reduction over `size` ranks of element i.
inline double Reference(DataType dtype, ReduceOp op, int size, int64_t i, int seed) {
  double acc = TestValue(dtype, op, 0, i, seed);
  for (int r = 1; r < size; ++r) {
    double v = TestValue(dtype, op, r, i, seed);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        acc += v;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
      case ReduceOp::kProduct:
        acc *= v;
        break;
      case ReduceOp::kAdasum:
        return NAN;  // not element-wise (core/adasum.h); tested from Python
    }
  }
  if (op == ReduceOp::kAverage) {
    acc = IsFloatingPoint(dtype) ? acc / size : std::trunc(acc / size);
  }
  return acc;
}

// Tolerance for comparing a result against Reference.
inline double Tolerance(DataType dtype, ReduceOp op, double ref) {
  if (op != ReduceOp::kAverage || !IsFloatingPoint(dtype)) return 0.0;
  const double rel = dtype == DataType::kFloat16    ? 1e-3
                     : dtype == DataType::kBFloat16 ? 8e-3
                                                    : 1e-6;
  return std::abs(ref) * rel + 1e-6;
}

// Every reduction, for tests that sweep them all.
inline constexpr ReduceOp kReduceOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                                          ReduceOp::kMax, ReduceOp::kProduct};

// Checks `out` (a host tensor) against Reference(), element by element.
inline void CheckAllreduced(const Tensor& out, ReduceOp op, int size, int seed,
                            const std::string& what) {
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    const double ref = Reference(out.dtype, op, size, i, seed);
    const double got = LoadValue(out.dtype, out.data(), i);
    ASSERT_NEAR(got, ref, Tolerance(out.dtype, op, ref)) << what << " element " << i;
  }
}

}  // namespace khorovod::testing
