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
  kInt16 = 8,
  kBool = 9,  // one byte, 0 or 1; sum and max are logical or, product and min logical and
};

inline constexpr DataType kAllDataTypes[] = {
    DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
    DataType::kInt8,    DataType::kUInt8,   DataType::kInt32,   DataType::kInt64};
// Types the host path (Gloo, host staging) also moves; NCCL has no type for
// them, so device tensors of these types need the staging backend.
inline constexpr DataType kHostOnlyDataTypes[] = {DataType::kInt16, DataType::kBool};

// Bytes per element; 0 for a value outside the enum.
size_t DataTypeSize(DataType dtype);
std::string_view DataTypeName(DataType dtype);
bool IsValidDataType(uint8_t raw);
bool IsFloatingPoint(DataType dtype);

}  // namespace khorovod
