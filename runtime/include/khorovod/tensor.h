// Tensor descriptions passed to and returned from collectives.
//
// TensorView does not own memory: the caller keeps the buffer alive and
// unmodified until the operation's Handle completes (as with Horovod's async
// ops). Tensor owns its bytes and is how variable-size results (allgather,
// alltoall, reducescatter) come back: in `storage` for host tensors, and in
// device memory (`device_storage`) when the input was a device tensor. A
// device result must not be dereferenced on the host; its memory is freed
// by its own deleter when the last reference goes, even after the runtime
// has shut down.
//
// Thread-safety: values; no internal synchronization.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
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

// "cpu" or "cuda:N", for messages.
std::string DeviceName(const Device& device);

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

// A tensor that owns its storage: host bytes, or device memory.
struct Tensor {
  DataType dtype = DataType::kFloat32;
  Shape shape;
  std::vector<std::byte> storage;  // host tensors
  Device device;                   // where data() lives
  // Device tensors: the memory, with the deleter that frees it. Null for an
  // empty device tensor.
  std::shared_ptr<void> device_storage;

  Tensor() = default;
  // A zero-filled host tensor.
  Tensor(DataType dt, Shape s) : dtype(dt), shape(std::move(s)) {
    storage.resize(static_cast<size_t>(NumElements(shape)) * DataTypeSize(dtype));
  }
  // A tensor over device memory the caller allocated (num_bytes() of it).
  static Tensor OnDevice(DataType dt, Shape s, Device d, std::shared_ptr<void> memory) {
    Tensor t;
    t.dtype = dt;
    t.shape = std::move(s);
    t.device = d;
    t.device_storage = std::move(memory);
    return t;
  }
  bool on_host() const { return device.kind == DeviceKind::kCPU; }
  void* data() { return on_host() ? static_cast<void*>(storage.data()) : device_storage.get(); }
  const void* data() const {
    return on_host() ? static_cast<const void*>(storage.data()) : device_storage.get();
  }
  // Host tensors only: typed access to the bytes.
  template <typename T>
  T* data_as() {
    return reinterpret_cast<T*>(storage.data());
  }
  template <typename T>
  const T* data_as() const {
    return reinterpret_cast<const T*>(storage.data());
  }
  int64_t num_elements() const { return NumElements(shape); }
  size_t num_bytes() const { return static_cast<size_t>(num_elements()) * DataTypeSize(dtype); }
  TensorView view() { return TensorView{data(), dtype, shape, device}; }
};

}  // namespace khorovod
