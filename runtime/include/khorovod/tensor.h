// Tensor descriptions passed to and returned from collectives.
//
// TensorView does not own memory: the caller keeps the buffer alive and
// unmodified until the operation's Handle completes (as with Horovod's async
// ops). Tensor owns its bytes and is how variable-size results (allgather,
// alltoall, reducescatter) come back.
//
// Thread-safety: values; no internal synchronization.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "khorovod/dtype.h"

namespace khorovod {

enum class DeviceKind : uint8_t { kCPU = 0, kCUDA = 1 };

struct Device {
  DeviceKind kind = DeviceKind::kCPU;
  int index = 0;  // GPU ordinal for kCUDA; ignored for kCPU
  bool operator==(const Device&) const = default;
};

using Shape = std::vector<int64_t>;

// Product of the dimensions; 1 for a scalar (empty shape).
int64_t NumElements(const Shape& shape);
std::string ShapeToString(const Shape& shape);

struct TensorView {
  void* data = nullptr;
  DataType dtype = DataType::kFloat32;
  Shape shape;
  Device device;

  int64_t num_elements() const { return NumElements(shape); }
  size_t num_bytes() const { return static_cast<size_t>(num_elements()) * DataTypeSize(dtype); }
};

// A host tensor that owns its storage.
struct Tensor {
  DataType dtype = DataType::kFloat32;
  Shape shape;
  std::vector<std::byte> storage;

  Tensor() = default;
  Tensor(DataType dt, Shape s) : dtype(dt), shape(std::move(s)) {
    storage.resize(static_cast<size_t>(NumElements(shape)) * DataTypeSize(dtype));
  }
  void* data() { return storage.data(); }
  const void* data() const { return storage.data(); }
  template <typename T>
  T* data_as() { return reinterpret_cast<T*>(storage.data()); }
  template <typename T>
  const T* data_as() const { return reinterpret_cast<const T*>(storage.data()); }
  int64_t num_elements() const { return NumElements(shape); }
  TensorView view() { return TensorView{storage.data(), dtype, shape, Device{}}; }
};

}  // namespace khorovod
