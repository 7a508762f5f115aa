#include "dlpack_export.h"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

namespace khorovod::python {
namespace {

// --- DLPack 0.x ABI ----------------------------------------------------------
enum DLDeviceType : int32_t { kDLCPU = 1, kDLCUDA = 2 };
enum DLDataTypeCode : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6 };
struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
// -----------------------------------------------------------------------------

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";

DLDataType ToDL(DataType d) {
  const uint8_t bits = static_cast<uint8_t>(DataTypeSize(d) * 8);
  switch (d) {
    case DataType::kFloat32:
    case DataType::kFloat64:
    case DataType::kFloat16:
      return {kDLFloat, bits, 1};
    case DataType::kBFloat16:
      return {kDLBfloat, bits, 1};
    case DataType::kInt8:
    case DataType::kInt32:
    case DataType::kInt16:
    case DataType::kInt64:
      return {kDLInt, bits, 1};
    case DataType::kUInt8:
      return {kDLUInt, bits, 1};
    case DataType::kBool:
      return {kDLBool, bits, 1};
  }
  throw std::invalid_argument("khorovod: no DLPack type for this dtype");
}

// Owns everything the DLTensor points into.
struct Managed {
  Tensor tensor;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensor dl{};
};

void DeleteManaged(DLManagedTensor* self) { delete static_cast<Managed*>(self->manager_ctx); }

// Runs when the capsule dies: a consumer that took the tensor renamed the
// capsule and now owns it; otherwise nobody does and it is freed here.
void CapsuleDestructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kUsedCapsuleName)) return;
  auto* dl = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (dl) {
    dl->deleter(dl);
  } else {
    PyErr_Clear();
  }
}

}  // namespace

pybind11::capsule ToDLPack(Tensor tensor) {
  if (tensor.num_elements() == 0)
    throw std::invalid_argument("khorovod: no DLPack capsule for an empty tensor");
  auto m = std::make_unique<Managed>();
  m->tensor = std::move(tensor);
  m->shape = m->tensor.shape;
  m->strides.assign(m->shape.size(), 1);
  for (size_t i = m->shape.size(); i-- > 1;) m->strides[i - 1] = m->strides[i] * m->shape[i];
  DLTensor& t = m->dl.dl_tensor;
  t.data = m->tensor.data();
  t.device = m->tensor.on_host() ? DLDevice{kDLCPU, 0} : DLDevice{kDLCUDA, m->tensor.device.index};
  t.ndim = static_cast<int32_t>(m->shape.size());
  t.dtype = ToDL(m->tensor.dtype);
  t.shape = m->shape.data();
  t.strides = m->strides.data();
  t.byte_offset = 0;
  m->dl.manager_ctx = m.get();
  m->dl.deleter = DeleteManaged;
  DLManagedTensor* dl = &m->dl;
  PyObject* capsule = PyCapsule_New(dl, kCapsuleName, CapsuleDestructor);
  if (!capsule) throw pybind11::error_already_set();
  m.release();  // owned by the capsule, then by its consumer
  return pybind11::reinterpret_steal<pybind11::capsule>(capsule);
}

}  // namespace khorovod::python
