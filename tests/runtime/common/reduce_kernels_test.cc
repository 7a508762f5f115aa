// Element-wise reduction, scaling and division kernels for every dtype.
#include "common/reduce_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iomanip>
#include <string>
#include <vector>

#include "common/half.h"

namespace khorovod {
namespace {

// A host buffer of `dtype` filled from / read back as doubles.
struct Buffer {
  DataType dtype;
  std::vector<std::byte> bytes;

  Buffer(DataType dt, const std::vector<double>& values)
      : dtype(dt), bytes(values.size() * DataTypeSize(dt)) {
    for (size_t i = 0; i < values.size(); ++i) Set(i, values[i]);
  }
  size_t size() const { return bytes.size() / DataTypeSize(dtype); }
  void* data() { return bytes.data(); }

  template <typename T>
  void Store(size_t i, T v) {
    std::memcpy(bytes.data() + i * sizeof(T), &v, sizeof(T));
  }
  template <typename T>
  T Load(size_t i) const {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    return v;
  }

  void Set(size_t i, double v) {
    switch (dtype) {
      case DataType::kFloat32:
        return Store<float>(i, static_cast<float>(v));
      case DataType::kFloat64:
        return Store<double>(i, v);
      case DataType::kFloat16:
        return Store<uint16_t>(i, FloatToHalf(static_cast<float>(v)));
      case DataType::kBFloat16:
        return Store<uint16_t>(i, FloatToBFloat16(static_cast<float>(v)));
      case DataType::kInt8:
        return Store<int8_t>(i, static_cast<int8_t>(v));
      case DataType::kUInt8:
        return Store<uint8_t>(i, static_cast<uint8_t>(v));
      case DataType::kInt32:
        return Store<int32_t>(i, static_cast<int32_t>(v));
      case DataType::kInt64:
        return Store<int64_t>(i, static_cast<int64_t>(v));
      case DataType::kInt16:
        return Store<int16_t>(i, static_cast<int16_t>(v));
      case DataType::kBool:
        return Store<bool>(i, v != 0);
    }
  }
  double Get(size_t i) const {
    switch (dtype) {
      case DataType::kFloat32:
        return Load<float>(i);
      case DataType::kFloat64:
        return Load<double>(i);
      case DataType::kFloat16:
        return HalfToFloat(Load<uint16_t>(i));
      case DataType::kBFloat16:
        return BFloat16ToFloat(Load<uint16_t>(i));
      case DataType::kInt8:
        return Load<int8_t>(i);
      case DataType::kUInt8:
        return Load<uint8_t>(i);
      case DataType::kInt32:
        return Load<int32_t>(i);
      case DataType::kInt64:
        return static_cast<double>(Load<int64_t>(i));
      case DataType::kInt16:
        return Load<int16_t>(i);
      case DataType::kBool:
        return Load<bool>(i) ? 1.0 : 0.0;
    }
    return NAN;
  }
  std::vector<double> Values() const {
    std::vector<double> v;
    for (size_t i = 0; i < size(); ++i) v.push_back(Get(i));
    return v;
  }
};

std::string Label(DataType dt, ReduceOp op) {
  return std::string(DataTypeName(dt)) + "/" + std::string(ReduceOpName(op));
}

// Small integers: every result below is exact in every dtype (uint8 inputs
// are non-negative).
const std::vector<double> kA = {1, -2, 3, 0, 5, -4, 7};
const std::vector<double> kB = {4, 3, -1, 2, -2, -3, 1};
const std::vector<double> kUA = {1, 2, 3, 0, 5, 4, 7};
const std::vector<double> kUB = {4, 3, 1, 2, 2, 3, 0};

double Apply(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return a + b;  // the division happens in Divide
    case ReduceOp::kMin:
      return std::min(a, b);
    case ReduceOp::kMax:
      return std::max(a, b);
    case ReduceOp::kProduct:
      return a * b;
    case ReduceOp::kAdasum:
      break;  // not element-wise: core/adasum.h, not in kOps
  }
  return NAN;
}

const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                         ReduceOp::kProduct};

TEST(ReduceKernels, EveryDtypeAndOpMatchesTheReference) {
  for (DataType dt : kAllDataTypes) {
    const auto& a = dt == DataType::kUInt8 ? kUA : kA;
    const auto& b = dt == DataType::kUInt8 ? kUB : kB;
    for (ReduceOp op : kOps) {
      ReduceFn fn = GetReduceFn(dt, op);
      ASSERT_NE(fn, nullptr) << Label(dt, op);
      Buffer x(dt, a), y(dt, b), out(dt, std::vector<double>(a.size(), 99));
      fn(out.data(), x.data(), y.data(), a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(out.Get(i), Apply(op, a[i], b[i])) << Label(dt, op) << " i=" << i;
      }
      EXPECT_EQ(x.Values(), a) << "input a modified, " << Label(dt, op);
      EXPECT_EQ(y.Values(), b) << "input b modified, " << Label(dt, op);
    }
  }
}

TEST(ReduceKernels, OutputMayAliasEitherInput) {
  for (DataType dt : kAllDataTypes) {
    const auto& a = dt == DataType::kUInt8 ? kUA : kA;
    const auto& b = dt == DataType::kUInt8 ? kUB : kB;
    for (ReduceOp op : kOps) {
      ReduceFn fn = GetReduceFn(dt, op);
      Buffer x(dt, a), y(dt, b);
      fn(x.data(), x.data(), y.data(), a.size());  // out == a
      Buffer x2(dt, a), y2(dt, b);
      fn(y2.data(), x2.data(), y2.data(), a.size());  // out == b
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(x.Get(i), Apply(op, a[i], b[i])) << Label(dt, op) << " out==a i=" << i;
        EXPECT_EQ(y2.Get(i), Apply(op, a[i], b[i])) << Label(dt, op) << " out==b i=" << i;
      }
    }
  }
}

TEST(ReduceKernels, CountLimitsTheElementsWritten) {
  Buffer x(DataType::kInt32, {1, 2, 3}), y(DataType::kInt32, {10, 20, 30}),
      out(DataType::kInt32, {0, 0, 0});
  GetReduceFn(DataType::kInt32, ReduceOp::kSum)(out.data(), x.data(), y.data(), 2);
  EXPECT_EQ(out.Values(), (std::vector<double>{11, 22, 0}));
}

TEST(ReduceKernels, SixteenBitFloatsRoundTheWidenedResultToNearestEven) {
  // 2048 + 1 = 2049 is a tie between the float16 values 2048 and 2050.
  Buffer x(DataType::kFloat16, {2048, 2048, 0.5}), y(DataType::kFloat16, {1, 3, 0.25});
  GetReduceFn(DataType::kFloat16, ReduceOp::kSum)(x.data(), x.data(), y.data(), 3);
  EXPECT_EQ(x.Values(), (std::vector<double>{2048, 2052, 0.75}));
  // bfloat16 has 8 significant bits: 256 + 1 ties to 256, 256 + 3 to 260.
  Buffer p(DataType::kBFloat16, {256, 256}), q(DataType::kBFloat16, {1, 3});
  GetReduceFn(DataType::kBFloat16, ReduceOp::kSum)(p.data(), p.data(), q.data(), 2);
  EXPECT_EQ(p.Values(), (std::vector<double>{256, 260}));
  // Overflow of a float16 sum goes to infinity.
  Buffer big(DataType::kFloat16, {60000}), big2(DataType::kFloat16, {60000});
  GetReduceFn(DataType::kFloat16, ReduceOp::kSum)(big.data(), big.data(), big2.data(), 1);
  EXPECT_EQ(big.Get(0), INFINITY);
}

TEST(Scale, MultipliesEveryDtype) {
  for (DataType dt : kAllDataTypes) {
    Buffer b(dt, {2, 4, 6, 0});
    Scale(b.data(), 4, dt, 1.5);
    EXPECT_EQ(b.Values(), (std::vector<double>{3, 6, 9, 0})) << DataTypeName(dt);
  }
}

TEST(Scale, IntegerResultsTruncateTowardZero) {
  for (DataType dt : {DataType::kInt8, DataType::kInt32, DataType::kInt64}) {
    Buffer b(dt, {-7, 7, -1, 5});
    Scale(b.data(), 4, dt, 0.5);
    EXPECT_EQ(b.Values(), (std::vector<double>{-3, 3, 0, 2})) << DataTypeName(dt);
  }
  Buffer u(DataType::kUInt8, {7, 255});
  Scale(u.data(), 2, DataType::kUInt8, 0.5);
  EXPECT_EQ(u.Values(), (std::vector<double>{3, 127}));
}

TEST(Scale, FactorOneAndCountZeroLeaveDataUntouched) {
  Buffer b(DataType::kFloat32, {1.25, -3});
  Scale(b.data(), 2, DataType::kFloat32, 1.0);
  Scale(b.data(), 0, DataType::kFloat32, 100.0);
  EXPECT_EQ(b.Values(), (std::vector<double>{1.25, -3}));
  Scale(b.data(), 1, DataType::kFloat32, -2.0);  // only the first element
  EXPECT_EQ(b.Values(), (std::vector<double>{-2.5, -3}));
}

TEST(Scale, SixteenBitFloatsAreScaledInFloatAndRoundedToNearestEven) {
  const double factor = 1.0 + 1.0 / 2048;  // exact in float
  Buffer h(DataType::kFloat16, {2048, 1, 3});
  Scale(h.data(), 3, DataType::kFloat16, factor);
  // 2049 and 1+2^-11 are ties (to the even neighbours 2048 and 1);
  // 3+3*2^-11 rounds up to the next float16, 3+2^-9.
  EXPECT_EQ(h.Values(), (std::vector<double>{2048, 1, 3.001953125}));
  Buffer b(DataType::kBFloat16, {256, 3});
  Scale(b.data(), 2, DataType::kBFloat16, 1.0 + 1.0 / 256);  // 257 ties to 256
  EXPECT_EQ(b.Values(), (std::vector<double>{256, 3.015625}));
}

TEST(Scale, Float32IsComputedInFloatAsDocumented) {
  // reduce_kernels.h: float32 scales in float with the factor rounded to
  // float. 2.25f * 0.1 is 0.225000009f that way and 0.224999994f in double.
  const float x = 2.25f;
  const double factor = 0.1;
  const float want = x * static_cast<float>(factor);
  ASSERT_NE(want, static_cast<float>(static_cast<double>(x) * factor))
      << "inputs no longer tell the two apart";
  float data = x;
  Scale(&data, 1, DataType::kFloat32, factor);
  EXPECT_EQ(data, want) << std::setprecision(9) << "got " << data << ", want " << want;
}

TEST(Divide, IntegerDivisionTruncatesTowardZero) {
  for (DataType dt : {DataType::kInt8, DataType::kInt32, DataType::kInt64}) {
    Buffer b(dt, {-7, 7, -1, 6, 0});
    Divide(b.data(), 5, dt, 2);
    EXPECT_EQ(b.Values(), (std::vector<double>{-3, 3, 0, 3, 0})) << DataTypeName(dt);
  }
  Buffer u(DataType::kUInt8, {255, 3});
  Divide(u.data(), 2, DataType::kUInt8, 4);
  EXPECT_EQ(u.Values(), (std::vector<double>{63, 0}));
}

TEST(Divide, FloatingTypesDivideExactly) {
  for (DataType dt :
       {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16}) {
    Buffer b(dt, {-7, 7, 1, 0});
    Divide(b.data(), 4, dt, 2);
    EXPECT_EQ(b.Values(), (std::vector<double>{-3.5, 3.5, 0.5, 0})) << DataTypeName(dt);
  }
  double d = 1.0;
  Divide(&d, 1, DataType::kFloat64, 3);
  EXPECT_EQ(d, 1.0 / 3);
}

TEST(Divide, DivisorOneAndCountZeroAreNoOps) {
  Buffer b(DataType::kInt32, {-7, 9});
  Divide(b.data(), 2, DataType::kInt32, 1);
  Divide(b.data(), 0, DataType::kInt32, 5);
  EXPECT_EQ(b.Values(), (std::vector<double>{-7, 9}));
}

TEST(Divide, EightBitTypesWithADivisorAboveTheirRange) {
  // kAverage divides by the world size, which may exceed 127 / 255. The
  // divisor must not be narrowed to the element type.
  Buffer s(DataType::kInt8, {100, -128, 127});
  Divide(s.data(), 3, DataType::kInt8, 200);
  EXPECT_EQ(s.Values(), (std::vector<double>{0, 0, 0})) << "int8 / 200";
  Buffer t(DataType::kInt8, {-128});
  Divide(t.data(), 1, DataType::kInt8, 128);
  EXPECT_EQ(t.Get(0), -1) << "int8 -128 / 128";
  Buffer u(DataType::kUInt8, {200, 255});
  Divide(u.data(), 2, DataType::kUInt8, 300);
  EXPECT_EQ(u.Values(), (std::vector<double>{0, 0})) << "uint8 / 300";
}

TEST(FillZeros, ZeroesExactlyCountElementsOfEveryDtype) {
  for (DataType dt : kAllDataTypes) {
    Buffer b(dt, {1, 2, 3, 4});
    FillZeros(b.data(), 3, dt);
    EXPECT_EQ(b.Values(), (std::vector<double>{0, 0, 0, 4})) << DataTypeName(dt);
    for (size_t i = 0; i < 3 * DataTypeSize(dt); ++i) ASSERT_EQ(b.bytes[i], std::byte{0});
    FillZeros(b.data(), 0, dt);  // no-op
    EXPECT_EQ(b.Get(3), 4);
  }
}

}  // namespace
}  // namespace khorovod
