#include "backend/registry.h"

#include <map>
#include <mutex>

#include "khorovod/util/mutex.h"

namespace khorovod {
namespace {

struct Entries {
  Mutex mu;
  std::map<std::string, BackendFactory> factories GUARDED_BY(mu);
  std::map<std::string, DeviceResolver> resolvers GUARDED_BY(mu);
  std::map<std::string, BackendInfo> infos GUARDED_BY(mu);
};

Status UnknownBackend(const std::string& name,
                      const std::map<std::string, BackendFactory>& factories) {
  std::string known;
  for (const auto& [n, f] : factories) known += (known.empty() ? "" : ", ") + n;
  return Status::InvalidArgument("unknown backend '" + name + "' (known: " + known + ")");
}

// Function-local static: safe to use from other translation units' static
// initializers regardless of initialization order.
Entries& Registry() {
  static Entries entries;
  return entries;
}

}  // namespace

void BackendRegistry::Register(const std::string& name, BackendFactory factory) {
  auto& r = Registry();
  MutexLock lock(r.mu);
  r.factories[name] = std::move(factory);
}

void BackendRegistry::RegisterDevice(const std::string& name, DeviceResolver resolver) {
  auto& r = Registry();
  MutexLock lock(r.mu);
  r.resolvers[name] = std::move(resolver);
}

void BackendRegistry::RegisterInfo(const std::string& name, BackendInfo info) {
  auto& r = Registry();
  MutexLock lock(r.mu);
  r.infos[name] = std::move(info);
}

StatusOr<std::map<std::string, std::string>> BackendRegistry::Info(const std::string& name,
                                                                   const Config& config) {
  BackendInfo info;
  {
    auto& r = Registry();
    MutexLock lock(r.mu);
    if (!r.factories.count(name)) {
      return UnknownBackend(name, r.factories);
    }
    auto it = r.infos.find(name);
    if (it == r.infos.end()) return std::map<std::string, std::string>{};
    info = it->second;
  }
  return info(config);
}

bool BackendRegistry::Has(const std::string& name) {
  auto& r = Registry();
  MutexLock lock(r.mu);
  return r.factories.count(name) > 0;
}

StatusOr<Device> BackendRegistry::ResolveDevice(const std::string& name, const Config& config) {
  DeviceResolver resolver;
  {
    auto& r = Registry();
    MutexLock lock(r.mu);
    if (!r.factories.count(name)) {
      return UnknownBackend(name, r.factories);
    }
    auto it = r.resolvers.find(name);
    if (it == r.resolvers.end()) {
      return Status::InvalidArgument("backend '" + name + "' does not work on device tensors");
    }
    resolver = it->second;
  }
  return resolver(config);
}

StatusOr<std::unique_ptr<Backend>> BackendRegistry::Create(const std::string& name,
                                                           const BackendInit& init) {
  if (name == "auto") {
    // Some host runs several ranks when there are more ranks than hosts;
    // every rank sees the same size and cross_size, so all choose alike
    // (local_size, this host's alone, may differ between hosts).
    const bool local_peers = init.config && init.config->size > init.config->cross_size;
    return Create(local_peers && Has("shm") ? "shm" : "gloo", init);
  }
  BackendFactory factory;
  {
    auto& r = Registry();
    MutexLock lock(r.mu);
    auto it = r.factories.find(name);
    if (it == r.factories.end()) {
      return UnknownBackend(name, r.factories);
    }
    factory = it->second;
  }
  return factory(init);
}

std::vector<std::string> BackendRegistry::Names() {
  auto& r = Registry();
  MutexLock lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [n, f] : r.factories) names.push_back(n);
  return names;
}

}  // namespace khorovod
