// Element types the runtime reduces and moves. The numeric values are part of
// the wire protocol between ranks; append new types, never renumber.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace khorovod {

enum class DataType : uint8_t {
  kFloat32 = 0,
  kFloat64 = 1,
  kFloat16 = 2,
  kBFloat16 = 3,
  kInt8 = 4,
  kUInt8 = 5,
  kInt32 = 6,
  kInt64 = 7,
};

inline constexpr DataType kAllDataTypes[] = {
    DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
    DataType::kInt8,    DataType::kUInt8,   DataType::kInt32,   DataType::kInt64};

// Bytes per element; 0 for a value outside the enum.
size_t DataTypeSize(DataType dtype);
std::string_view DataTypeName(DataType dtype);
bool IsValidDataType(uint8_t raw);
bool IsFloatingPoint(DataType dtype);

}  // namespace khorovod
