// DeviceBackend: a session's backend for device tensors, created lazily.
//
// Which backend: Config::gpu_backend (KHOROVOD_GPU_OPERATIONS). "auto" means
// "nccl" when this build registered it, else "staging"; any other value
// names a registered backend (tests register an emulated one).
//
// Pinned() says which device this rank serves, asking the backend's
// registered DeviceResolver once, when the first device tensor is
// submitted: a process that never submits one never touches CUDA.
//
// Get() creates the backend at the first device response. Every rank runs
// the same responses in the same order, so every rank calls Get() at the
// same point, which keeps communicator formation collective (NCCL's unique
// id goes over the session's Gloo context). A failed creation is kept and
// returned by every later Get(): a half-formed communicator cannot be
// repaired within the session, only by a reset, which builds a new
// DeviceBackend with the new session. Destruction drops the backend (NCCL
// aborts its communicator; it never waits for peers), unless Retire() took
// its legacy first: the runtime hands that to the next session's
// DeviceBackend, whose backend may re-form from it (NCCL: shrink or grow).
//
// Thread-safety: Pinned() may be called from any thread; Get(), Drop() and
// the destructor only from the background thread (or after it ended).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "backend/registry.h"
#include "khorovod/util/mutex.h"

namespace khorovod {

class DeviceBackend {
 public:
  // `config` must outlive this object (it is the session's). `legacy` is
  // what the previous session's DeviceBackend retired (may be null).
  DeviceBackend(const Config* config, std::shared_ptr<gloo::Context> context,
                std::shared_ptr<BackendLegacy> legacy = nullptr);

  // The registered backend name that Config::gpu_backend selects.
  static std::string BackendName(const Config& config);

  StatusOr<Device> Pinned();
  // The pinned device if Pinned() has succeeded, else nothing.
  std::optional<Device> resolved();
  // The backend, created on first use; it has DeviceOps and supports the
  // pinned device.
  StatusOr<Backend*> Get();
  bool created() const { return backend_ != nullptr; }
  // Destroys the backend now (closing its connections) and fails every
  // later Get() with `why`. Pinned() keeps working: user threads may still
  // be submitting.
  void Drop(const Status& why);
  // Ends the backend (if any) through Backend::Retire and returns what it
  // left, or the legacy that Drop kept, or the unused one this object was
  // given. Called once the session's thread has ended.
  std::shared_ptr<BackendLegacy> Retire();

 private:
  const Config* config_;
  std::shared_ptr<gloo::Context> context_;
  Mutex pinned_mu_;
  std::optional<StatusOr<Device>> pinned_ GUARDED_BY(pinned_mu_);
  std::unique_ptr<Backend> backend_;
  std::optional<Status> failed_;
  std::shared_ptr<BackendLegacy> legacy_;  // handed in, or left by Drop
};

}  // namespace khorovod
