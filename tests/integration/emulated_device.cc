#include "emulated_device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include "backend/registry.h"
#include "backend/staging/staging_backend.h"
#include "common/enforce.h"

namespace khorovod::testing {
namespace {

struct Region {
  size_t bytes;
  size_t mapped;
  int open = 0;
};

struct Regions {
  std::mutex mu;
  std::map<uintptr_t, Region> by_base;
};

Regions& AllRegions() {
  static Regions* regions = new Regions;  // never destroyed: deleters may run at exit
  return *regions;
}

// The region holding [p, p + bytes), or end().
std::map<uintptr_t, Region>::iterator Find(Regions& r, const void* p, size_t bytes) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  auto it = r.by_base.upper_bound(at);
  if (it == r.by_base.begin()) return r.by_base.end();
  --it;
  if (at + bytes > it->first + it->second.bytes) return r.by_base.end();
  return it;
}

// Opens (or closes) the window of the region holding p.
uintptr_t Open(const void* p, size_t bytes) {
  Regions& r = AllRegions();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = Find(r, p, bytes);
  if (it == r.by_base.end()) return 0;
  if (it->second.open++ == 0) {
    KH_ENFORCE(mprotect(reinterpret_cast<void*>(it->first), it->second.mapped,
                        PROT_READ | PROT_WRITE) == 0,
               "mprotect");
  }
  return it->first;
}

void Close(uintptr_t base) {
  Regions& r = AllRegions();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.by_base.find(base);
  KH_ENFORCE(it != r.by_base.end(), "closing an unknown emulated region");
  if (--it->second.open == 0) {
    KH_ENFORCE(mprotect(reinterpret_cast<void*>(base), it->second.mapped, PROT_NONE) == 0,
               "mprotect");
  }
}

std::atomic<int> created{0};
std::atomic<int> alive{0};

class EmulatedCopier final : public DeviceCopier {
 public:
  explicit EmulatedCopier(Device device) : device_(device) { ++alive; }
  ~EmulatedCopier() override { --alive; }

  Device device() const override { return device_; }
  Status ToHost(void* host, const void* device, size_t bytes) override {
    return EmulatedCopy(host, false, device, true, bytes);
  }
  Status ToDevice(void* device, const void* host, size_t bytes) override {
    return EmulatedCopy(device, true, host, false, bytes);
  }
  Status Copy(void* dst, const void* src, size_t bytes) override {
    return EmulatedCopy(dst, true, src, true, bytes);
  }
  Status Zero(void* device, size_t bytes) override {
    const uintptr_t base = Open(device, bytes);
    if (!base)
      return Status::Internal("zero-fill of " + std::to_string(bytes) +
                              " bytes outside device memory");
    std::memset(device, 0, bytes);
    Close(base);
    return Status::Ok();
  }
  StatusOr<std::shared_ptr<void>> Allocate(size_t bytes) override { return EmulatedAlloc(bytes); }

 private:
  Device device_;
};

StatusOr<Device> ResolveEmulated(const Config& config) {
  return Device{DeviceKind::kCUDA, config.gpu_device >= 0 ? config.gpu_device : config.local_rank};
}

StatusOr<std::unique_ptr<Backend>> MakeEmulated(const BackendInit& init) {
  if (!init.config) return Status::FailedPrecondition("emulated backend needs a config");
  auto host = BackendRegistry::Create(init.config->cpu_backend, init);
  if (!host.ok()) return host.status();
  auto device = ResolveEmulated(*init.config);
  ++created;
  return std::unique_ptr<Backend>(
      std::make_unique<StagingBackend>(std::move(*host), std::make_unique<EmulatedCopier>(*device),
                                       init.config->rank, init.config->size));
}

}  // namespace

std::shared_ptr<void> EmulatedAlloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t mapped = (bytes + page - 1) / page * page;
  void* p = mmap(nullptr, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  KH_ENFORCE(p != MAP_FAILED, "mmap of " << mapped << " bytes");
  {
    Regions& r = AllRegions();
    std::lock_guard<std::mutex> lock(r.mu);
    r.by_base[reinterpret_cast<uintptr_t>(p)] = Region{bytes, mapped};
  }
  return std::shared_ptr<void>(p, [mapped](void* q) {
    Regions& r = AllRegions();
    {
      std::lock_guard<std::mutex> lock(r.mu);
      r.by_base.erase(reinterpret_cast<uintptr_t>(q));
    }
    munmap(q, mapped);
  });
}

bool IsEmulatedDeviceMemory(const void* p, size_t bytes) {
  Regions& r = AllRegions();
  std::lock_guard<std::mutex> lock(r.mu);
  return Find(r, p, bytes) != r.by_base.end();
}

Status EmulatedCopy(void* dst, bool dst_on_device, const void* src, bool src_on_device,
                    size_t bytes) {
  if (bytes == 0) return Status::Ok();
  uintptr_t dst_base = 0, src_base = 0;
  if (dst_on_device && !(dst_base = Open(dst, bytes))) {
    return Status::Internal("copy of " + std::to_string(bytes) + " bytes to outside device memory");
  }
  if (src_on_device && !(src_base = Open(src, bytes))) {
    if (dst_base) Close(dst_base);
    return Status::Internal("copy of " + std::to_string(bytes) +
                            " bytes from outside device memory");
  }
  std::memmove(dst, src, bytes);
  if (src_base) Close(src_base);
  if (dst_base) Close(dst_base);
  return Status::Ok();
}

int EmulatedBackendsCreated() { return created.load(); }
int EmulatedBackendsAlive() { return alive.load(); }

DeviceTensor DeviceTensor::From(Tensor host, Device device) {
  DeviceTensor t;
  t.memory = EmulatedAlloc(host.storage.size());
  t.device = device;
  KH_ENFORCE(
      EmulatedCopy(t.memory.get(), true, host.storage.data(), false, host.storage.size()).ok(),
      "upload");
  t.host = std::move(host);
  return t;
}

TensorView DeviceTensor::view() { return TensorView{memory.get(), host.dtype, host.shape, device}; }

const Tensor& DeviceTensor::Download() {
  KH_ENFORCE(EmulatedCopy(host.storage.data(), false, memory.get(), true, host.storage.size()).ok(),
             "download");
  return host;
}

Tensor DownloadResult(const Tensor& result) {
  Tensor host(result.dtype, result.shape);
  KH_ENFORCE(EmulatedCopy(host.storage.data(), false, result.device_storage.get(), true,
                          host.storage.size())
                 .ok(),
             "download of a result");
  return host;
}

}  // namespace khorovod::testing

KH_REGISTER_BACKEND(emulated, "emulated", ::khorovod::testing::MakeEmulated)
KH_REGISTER_DEVICE(emulated, "emulated", ::khorovod::testing::ResolveEmulated)
