#include "backend/device_backend.h"

#include "common/enforce.h"

namespace khorovod {

DeviceBackend::DeviceBackend(const Config* config, std::shared_ptr<gloo::Context> context,
                             std::shared_ptr<BackendLegacy> legacy)
    : config_(config), context_(std::move(context)), legacy_(std::move(legacy)) {
  KH_ENFORCE(config_ != nullptr, "device backend without a config");
}

std::string DeviceBackend::BackendName(const Config& config) {
  if (config.gpu_backend != "auto") return config.gpu_backend;
  return BackendRegistry::Has("nccl") ? "nccl" : "staging";
}

StatusOr<Device> DeviceBackend::Pinned() {
  MutexLock lock(pinned_mu_);
  if (!pinned_) {
    const std::string name = BackendName(*config_);
    StatusOr<Device> d = config_->gpu_backend == "auto" && !BackendRegistry::Has(name)
                             ? StatusOr<Device>(Status::FailedPrecondition(
                                   "this build has no device backend (configured with "
                                   "KHOROVOD_WITH_NCCL=OFF, or CUDA was not found)"))
                             : BackendRegistry::ResolveDevice(name, *config_);
    if (!d.ok()) {
      // The cause (no driver, no GPU, a bad KHOROVOD_GPU_DEVICE, a build
      // without device backends) is the user's to fix: an invalid argument.
      d = Status::InvalidArgument(
          "device tensors cannot be used (KHOROVOD_GPU_OPERATIONS selects '" + name +
          "'): " + d.status().message());
    }
    pinned_ = std::move(d);
  }
  return *pinned_;
}

std::optional<Device> DeviceBackend::resolved() {
  MutexLock lock(pinned_mu_);
  if (pinned_ && pinned_->ok()) return **pinned_;
  return std::nullopt;
}

void DeviceBackend::Drop(const Status& why) {
  if (backend_) legacy_ = backend_->Retire();
  backend_.reset();
  failed_ = why.ok() ? Status::Aborted("the device backend was dropped") : why;
}

StatusOr<Backend*> DeviceBackend::Get() {
  if (backend_) return backend_.get();
  if (failed_) return *failed_;
  auto fail = [&](Status s) -> StatusOr<Backend*> {
    failed_ = s;
    return s;
  };
  StatusOr<Device> pinned = Pinned();
  if (!pinned.ok()) return fail(pinned.status());
  const std::string name = BackendName(*config_);
  // The legacy goes to this creation only: whatever it does not take over
  // is released when `init` goes.
  BackendInit init{config_, context_, std::move(legacy_)};
  legacy_.reset();
  auto made = BackendRegistry::Create(name, init);
  if (!made.ok()) {
    return fail(Status(made.status().code(),
                       "creating the device backend '" + name + "': " + made.status().message()));
  }
  if (!(*made)->device_ops() || !(*made)->SupportsDevice(*pinned)) {
    return fail(Status::InvalidArgument("backend '" + name + "' cannot run collectives on " +
                                        DeviceName(*pinned)));
  }
  backend_ = std::move(*made);
  return backend_.get();
}

std::shared_ptr<BackendLegacy> DeviceBackend::Retire() {
  if (backend_) {
    legacy_ = backend_->Retire();
    backend_.reset();
  }
  return std::move(legacy_);
}

}  // namespace khorovod
