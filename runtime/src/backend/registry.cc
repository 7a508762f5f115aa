#include "backend/registry.h"

#include <map>
#include <mutex>

namespace khorovod {
namespace {

struct Entries {
  std::mutex mu;
  std::map<std::string, BackendFactory> factories;
};

// Function-local static: safe to use from other translation units' static
// initializers regardless of initialization order.
Entries& Registry() {
  static Entries entries;
  return entries;
}

}  // namespace

void BackendRegistry::Register(const std::string& name, BackendFactory factory) {
  auto& r = Registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.factories[name] = std::move(factory);
}

StatusOr<std::unique_ptr<Backend>> BackendRegistry::Create(const std::string& name,
                                                           const BackendInit& init) {
  BackendFactory factory;
  {
    auto& r = Registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.factories.find(name);
    if (it == r.factories.end()) {
      std::string known;
      for (const auto& [n, f] : r.factories) known += (known.empty() ? "" : ", ") + n;
      return Status::InvalidArgument("unknown backend '" + name + "' (known: " + known + ")");
    }
    factory = it->second;
  }
  return factory(init);
}

std::vector<std::string> BackendRegistry::Names() {
  auto& r = Registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [n, f] : r.factories) names.push_back(n);
  return names;
}

}  // namespace khorovod
