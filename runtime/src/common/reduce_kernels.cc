#include "common/reduce_kernels.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/enforce.h"
#include "common/half.h"

namespace khorovod {
namespace {

// On bool, sum is logical or and product logical and (as torch reduces bools).
struct SumOp {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_same_v<T, bool>) return a || b;
    else return static_cast<T>(a + b);
  }
};
struct MinOp {
  template <typename T>
  static T apply(T a, T b) { return std::min(a, b); }
};
struct MaxOp {
  template <typename T>
  static T apply(T a, T b) { return std::max(a, b); }
};
struct ProdOp {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_same_v<T, bool>) return a && b;
    else return static_cast<T>(a * b);
  }
};

template <typename T, typename Op>
void NativeReduce(void* out, const void* a, const void* b, size_t n) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = Op::apply(x[i], y[i]);
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float), typename Op>
void Reduce16(void* out, const void* a, const void* b, size_t n) {
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = FromFloat(Op::apply(ToFloat(x[i]), ToFloat(y[i])));
}

template <typename Op>
ReduceFn ForDtype(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return &NativeReduce<float, Op>;
    case DataType::kFloat64: return &NativeReduce<double, Op>;
    case DataType::kFloat16: return &Reduce16<HalfToFloat, FloatToHalf, Op>;
    case DataType::kBFloat16: return &Reduce16<BFloat16ToFloat, FloatToBFloat16, Op>;
    case DataType::kInt8: return &NativeReduce<int8_t, Op>;
    case DataType::kUInt8: return &NativeReduce<uint8_t, Op>;
    case DataType::kInt32: return &NativeReduce<int32_t, Op>;
    case DataType::kInt64: return &NativeReduce<int64_t, Op>;
    case DataType::kInt16: return &NativeReduce<int16_t, Op>;
    case DataType::kBool: return &NativeReduce<bool, Op>;
  }
  return nullptr;
}

template <typename T>
void ScaleNative(void* data, size_t n, double factor) {
  T* p = static_cast<T*>(data);
  if constexpr (std::is_floating_point_v<T>) {
    const T f = static_cast<T>(factor);
    for (size_t i = 0; i < n; ++i) p[i] *= f;
  } else {
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<double>(p[i]) * factor);
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void Scale16(void* data, size_t n, double factor) {
  uint16_t* p = static_cast<uint16_t*>(data);
  const float f = static_cast<float>(factor);
  for (size_t i = 0; i < n; ++i) p[i] = FromFloat(ToFloat(p[i]) * f);
}

}  // namespace

ReduceFn GetReduceFn(DataType dtype, ReduceOp op) {
  ReduceFn fn = nullptr;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: fn = ForDtype<SumOp>(dtype); break;
    case ReduceOp::kMin: fn = ForDtype<MinOp>(dtype); break;
    case ReduceOp::kMax: fn = ForDtype<MaxOp>(dtype); break;
    case ReduceOp::kProduct: fn = ForDtype<ProdOp>(dtype); break;
  }
  KH_ENFORCE(fn != nullptr, "no reduction for dtype " << static_cast<int>(dtype) << " op "
                                                      << static_cast<int>(op));
  return fn;
}

void Scale(void* data, size_t count, DataType dtype, double factor) {
  if (factor == 1.0 || count == 0) return;
  switch (dtype) {
    case DataType::kFloat32: return ScaleNative<float>(data, count, factor);
    case DataType::kFloat64: return ScaleNative<double>(data, count, factor);
    case DataType::kFloat16: return Scale16<HalfToFloat, FloatToHalf>(data, count, factor);
    case DataType::kBFloat16: return Scale16<BFloat16ToFloat, FloatToBFloat16>(data, count, factor);
    case DataType::kInt8: return ScaleNative<int8_t>(data, count, factor);
    case DataType::kUInt8: return ScaleNative<uint8_t>(data, count, factor);
    case DataType::kInt32: return ScaleNative<int32_t>(data, count, factor);
    case DataType::kInt64: return ScaleNative<int64_t>(data, count, factor);
    case DataType::kInt16: return ScaleNative<int16_t>(data, count, factor);
    case DataType::kBool: return ScaleNative<bool>(data, count, factor);
  }
  KH_ENFORCE(false, "Scale: invalid dtype");
}

namespace {
template <typename T>
void DivideNative(void* data, size_t n, int64_t divisor) {
  T* p = static_cast<T*>(data);
  if constexpr (std::is_floating_point_v<T>) {
    const T d = static_cast<T>(divisor);
    for (size_t i = 0; i < n; ++i) p[i] /= d;
  } else {
    // Divide in int64 so a divisor beyond T's range (e.g. 256 ranks for
    // uint8) neither wraps nor becomes zero.
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<int64_t>(p[i]) / divisor);
  }
}
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void Divide16(void* data, size_t n, int64_t divisor) {
  uint16_t* p = static_cast<uint16_t*>(data);
  const float d = static_cast<float>(divisor);
  for (size_t i = 0; i < n; ++i) p[i] = FromFloat(ToFloat(p[i]) / d);
}
}  // namespace

void Divide(void* data, size_t count, DataType dtype, int64_t divisor) {
  if (divisor == 1 || count == 0) return;
  KH_ENFORCE(divisor > 0, "Divide by " << divisor);
  switch (dtype) {
    case DataType::kFloat32: return DivideNative<float>(data, count, divisor);
    case DataType::kFloat64: return DivideNative<double>(data, count, divisor);
    case DataType::kFloat16: return Divide16<HalfToFloat, FloatToHalf>(data, count, divisor);
    case DataType::kBFloat16: return Divide16<BFloat16ToFloat, FloatToBFloat16>(data, count, divisor);
    case DataType::kInt8: return DivideNative<int8_t>(data, count, divisor);
    case DataType::kUInt8: return DivideNative<uint8_t>(data, count, divisor);
    case DataType::kInt32: return DivideNative<int32_t>(data, count, divisor);
    case DataType::kInt64: return DivideNative<int64_t>(data, count, divisor);
    case DataType::kInt16: return DivideNative<int16_t>(data, count, divisor);
    case DataType::kBool: return DivideNative<bool>(data, count, divisor);
  }
  KH_ENFORCE(false, "Divide: invalid dtype");
}

void FillZeros(void* data, size_t count, DataType dtype) {
  // All supported types represent zero as all-zero bits.
  if (count) std::memset(data, 0, count * DataTypeSize(dtype));
}

}  // namespace khorovod
