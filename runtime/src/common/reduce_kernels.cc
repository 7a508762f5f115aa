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
    if constexpr (std::is_same_v<T, bool>)
      return a || b;
    else
      return static_cast<T>(a + b);
  }
};
struct MinOp {
  template <typename T>
  static T apply(T a, T b) {
    return std::min(a, b);
  }
};
struct MaxOp {
  template <typename T>
  static T apply(T a, T b) {
    return std::max(a, b);
  }
};
struct ProdOp {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_same_v<T, bool>)
      return a && b;
    else
      return static_cast<T>(a * b);
  }
};

// How one dtype's elements are stored and computed with: native types as
// themselves, the 16-bit floats stored as uint16_t and computed as float.
template <typename T>
struct NativeElem {
  using Stored = T;
  using Compute = T;
  static T Load(T v) { return v; }
  static T Store(T v) { return v; }
};
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
struct Float16Elem {
  using Stored = uint16_t;
  using Compute = float;
  static float Load(uint16_t v) { return ToFloat(v); }
  static uint16_t Store(float v) { return FromFloat(v); }
};

// Calls visit.template operator()<Elem>() with the element codec of `dtype`:
// the one place that maps dtypes to C++ types.
template <typename Visit>
decltype(auto) VisitDtype(DataType dtype, Visit&& visit) {
  switch (dtype) {
    case DataType::kFloat32:
      return visit.template operator()<NativeElem<float>>();
    case DataType::kFloat64:
      return visit.template operator()<NativeElem<double>>();
    case DataType::kFloat16:
      return visit.template operator()<Float16Elem<HalfToFloat, FloatToHalf>>();
    case DataType::kBFloat16:
      return visit.template operator()<Float16Elem<BFloat16ToFloat, FloatToBFloat16>>();
    case DataType::kInt8:
      return visit.template operator()<NativeElem<int8_t>>();
    case DataType::kUInt8:
      return visit.template operator()<NativeElem<uint8_t>>();
    case DataType::kInt32:
      return visit.template operator()<NativeElem<int32_t>>();
    case DataType::kInt64:
      return visit.template operator()<NativeElem<int64_t>>();
    case DataType::kInt16:
      return visit.template operator()<NativeElem<int16_t>>();
    case DataType::kBool:
      return visit.template operator()<NativeElem<bool>>();
  }
  KH_ENFORCE(false, "invalid dtype " << static_cast<int>(dtype));
  __builtin_unreachable();
}

template <typename E, typename Op>
void ReduceElems(void* out, const void* a, const void* b, size_t n) {
  using S = typename E::Stored;
  S* o = static_cast<S*>(out);
  const S* x = static_cast<const S*>(a);
  const S* y = static_cast<const S*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = E::Store(Op::apply(E::Load(x[i]), E::Load(y[i])));
}

template <typename Op>
ReduceFn ForDtype(DataType dtype) {
  return VisitDtype(dtype, []<typename E>() -> ReduceFn { return &ReduceElems<E, Op>; });
}

// Floating types scale in their own precision; integers and bool through
// double, so that e.g. a 0.5 factor rounds toward zero as a cast does.
template <typename E>
void ScaleElems(void* data, size_t n, double factor) {
  using C = typename E::Compute;
  auto* p = static_cast<typename E::Stored*>(data);
  if constexpr (std::is_floating_point_v<C>) {
    const C f = static_cast<C>(factor);
    for (size_t i = 0; i < n; ++i) p[i] = E::Store(E::Load(p[i]) * f);
  } else {
    for (size_t i = 0; i < n; ++i)
      p[i] = E::Store(static_cast<C>(static_cast<double>(E::Load(p[i])) * factor));
  }
}

// Integers divide in int64, so a divisor beyond the type's range (e.g. 256
// ranks for uint8) neither wraps nor becomes zero.
template <typename E>
void DivideElems(void* data, size_t n, int64_t divisor) {
  using C = typename E::Compute;
  auto* p = static_cast<typename E::Stored*>(data);
  if constexpr (std::is_floating_point_v<C>) {
    const C d = static_cast<C>(divisor);
    for (size_t i = 0; i < n; ++i) p[i] = E::Store(E::Load(p[i]) / d);
  } else {
    for (size_t i = 0; i < n; ++i)
      p[i] = E::Store(static_cast<C>(static_cast<int64_t>(E::Load(p[i])) / divisor));
  }
}

}  // namespace

ReduceFn GetReduceFn(DataType dtype, ReduceOp op) {
  ReduceFn fn = nullptr;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      fn = ForDtype<SumOp>(dtype);
      break;
    case ReduceOp::kMin:
      fn = ForDtype<MinOp>(dtype);
      break;
    case ReduceOp::kMax:
      fn = ForDtype<MaxOp>(dtype);
      break;
    case ReduceOp::kProduct:
      fn = ForDtype<ProdOp>(dtype);
      break;
    case ReduceOp::kAdasum:
      break;  // not element-wise: core/adasum.h
  }
  KH_ENFORCE(fn != nullptr, "no reduction for dtype " << static_cast<int>(dtype) << " op "
                                                      << static_cast<int>(op));
  return fn;
}

void Scale(void* data, size_t count, DataType dtype, double factor) {
  if (factor == 1.0 || count == 0) return;
  VisitDtype(dtype, [&]<typename E>() { ScaleElems<E>(data, count, factor); });
}

void Divide(void* data, size_t count, DataType dtype, int64_t divisor) {
  if (divisor == 1 || count == 0) return;
  KH_ENFORCE(divisor > 0, "Divide by " << divisor);
  VisitDtype(dtype, [&]<typename E>() { DivideElems<E>(data, count, divisor); });
}

void FillZeros(void* data, size_t count, DataType dtype) {
  // All supported types represent zero as all-zero bits.
  if (count) std::memset(data, 0, count * DataTypeSize(dtype));
}

}  // namespace khorovod
