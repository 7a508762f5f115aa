// BackendRegistry: backends register a factory under a name at static
// initialization; the runtime creates the one named in Config. Adding a
// backend means adding a folder and a registration, not an #if.
//
// Device backends also register a DeviceResolver: which device this process
// would use (for CUDA: KHOROVOD_GPU_DEVICE, else local_rank modulo the
// visible devices). The runtime asks it when the first device tensor is
// submitted, to refuse tensors on another device at once, before anything
// collective happens.
//
// Thread-safety: registration happens during static initialization; lookups
// after main() starts are read-only and may run concurrently.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "khorovod/config.h"

namespace gloo {
class Context;
}

namespace khorovod {

// What a backend is built from: the job's configuration, the Gloo
// context the bootstrap already connected (NCCL uses it to exchange its
// unique id), and what the previous session's backend of this process
// retired (Backend::Retire; null when there was none).
struct BackendInit {
  const Config* config = nullptr;
  std::shared_ptr<gloo::Context> gloo_context;
  std::shared_ptr<BackendLegacy> legacy = nullptr;
};

using BackendFactory = std::function<StatusOr<std::unique_ptr<Backend>>(const BackendInit&)>;
using DeviceResolver = std::function<StatusOr<Device>(const Config&)>;
// Facts about the library a backend runs on, as key/value text (NCCL: the
// loaded version, its path, the fault-tolerance calls it has), or an error
// saying why it cannot run. Loads nothing a backend would not load anyway.
using BackendInfo = std::function<StatusOr<std::map<std::string, std::string>>(const Config&)>;

class BackendRegistry {
 public:
  static void Register(const std::string& name, BackendFactory factory);
  static void RegisterDevice(const std::string& name, DeviceResolver resolver);
  static void RegisterInfo(const std::string& name, BackendInfo info);
  // kInvalidArgument for an unknown name; an empty map for a backend that
  // registered no BackendInfo.
  static StatusOr<std::map<std::string, std::string>> Info(const std::string& name,
                                                           const Config& config);
  // "auto" names the host backend for this placement: "shm" when it is
  // registered and some host runs several ranks (size > cross_size), else
  // "gloo".
  static StatusOr<std::unique_ptr<Backend>> Create(const std::string& name,
                                                   const BackendInit& init);
  // kInvalidArgument for an unknown name or a backend without a resolver
  // (a host backend).
  static StatusOr<Device> ResolveDevice(const std::string& name, const Config& config);
  static bool Has(const std::string& name);
  static std::vector<std::string> Names();
};

// Defines a static object whose constructor registers `factory` as `name`.
#define KH_REGISTER_BACKEND(ident, name, factory)         \
  namespace {                                             \
  const bool kh_registered_##ident = [] {                 \
    ::khorovod::BackendRegistry::Register(name, factory); \
    return true;                                          \
  }();                                                    \
  }

// Registers `resolver` as the device of the backend `name`.
#define KH_REGISTER_DEVICE(ident, name, resolver)                \
  namespace {                                                    \
  const bool kh_device_registered_##ident = [] {                 \
    ::khorovod::BackendRegistry::RegisterDevice(name, resolver); \
    return true;                                                 \
  }();                                                           \
  }

// Registers `info` as what the backend `name` reports about itself.
#define KH_REGISTER_BACKEND_INFO(ident, name, info)        \
  namespace {                                              \
  const bool kh_info_registered_##ident = [] {             \
    ::khorovod::BackendRegistry::RegisterInfo(name, info); \
    return true;                                           \
  }();                                                     \
  }

}  // namespace khorovod
