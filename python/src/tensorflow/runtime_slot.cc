#include "runtime_slot.h"

#include <mutex>

namespace khorovod::tensorflow_ops {

RuntimeSlot& RuntimeSlot::Instance() {
  static RuntimeSlot slot;  // see the header: TensorFlow gives kernels no other way in
  return slot;
}

void RuntimeSlot::Attach(Runtime* runtime) {
  WriterLock lock(mu_);
  runtime_ = runtime;
}

void RuntimeSlot::Detach() {
  WriterLock lock(mu_);
  runtime_ = nullptr;
}

}  // namespace khorovod::tensorflow_ops

// The C entry points khorovod/tensorflow/mpi_ops.py calls through ctypes
// with the address _khorovod.Runtime.address() returns.
extern "C" {
__attribute__((visibility("default"))) void khorovod_tf_attach_runtime(void* runtime) {
  khorovod::tensorflow_ops::RuntimeSlot::Instance().Attach(
      static_cast<khorovod::Runtime*>(runtime));
}
__attribute__((visibility("default"))) void khorovod_tf_detach_runtime() {
  khorovod::tensorflow_ops::RuntimeSlot::Instance().Detach();
}
}
