// RuntimeSlot: how khorovod's TensorFlow kernels reach the process's Runtime.
//
// TensorFlow constructs kernels itself (REGISTER_KERNEL_BUILDER) and gives
// them only attributes, so the Runtime that khorovod's Python context owns
// (python/khorovod/_context.py, one per process) cannot be handed to them.
// The op library therefore keeps one slot, set from Python through the C
// entry points below when the context initializes a runtime and cleared
// before it shuts one down. It is the op library's counterpart of the
// Python CONTEXT and the only mutable state of the library.
//
// Lifetime: a kernel holds a Lease while it submits; Detach waits for every
// lease to end, so the Runtime is never destroyed under a submission. After
// submitting a kernel keeps only the Handle, which outlives the Runtime
// (shutdown completes pending handles with ABORTED).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <shared_mutex>

#include "khorovod/runtime.h"
#include "khorovod/util/mutex.h"

namespace khorovod::tensorflow_ops {

class RuntimeSlot {
 public:
  // A shared hold on the slot: runtime() stays valid while it lives.
  class SCOPED_CAPABILITY Lease {
   public:
    explicit Lease(RuntimeSlot& slot) ACQUIRE_SHARED(slot.mu_)
        : lock_(slot.mu_), runtime_(slot.runtime_) {}
    ~Lease() RELEASE() {}
    Runtime* runtime() const { return runtime_; }  // null when none is attached

   private:
    ReaderLock lock_;
    Runtime* runtime_;
  };

  static RuntimeSlot& Instance();
  void Attach(Runtime* runtime);
  void Detach();  // waits for current leases

 private:
  SharedMutex mu_;
  Runtime* runtime_ GUARDED_BY(mu_) = nullptr;
};

}  // namespace khorovod::tensorflow_ops
