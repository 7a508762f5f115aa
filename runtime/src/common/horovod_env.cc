#include "common/horovod_env.h"

#include <algorithm>
#include <cctype>

namespace khorovod {
namespace {

struct Alias {
  const char* horovod;
  const char* ours;
  bool lowercase;  // operation names: Horovod documents them in capitals
};

constexpr Alias kAliases[] = {
    {"HOROVOD_FUSION_THRESHOLD", "KHOROVOD_FUSION_THRESHOLD", false},
    {"HOROVOD_CYCLE_TIME", "KHOROVOD_CYCLE_TIME", false},
    {"HOROVOD_CACHE_CAPACITY", "KHOROVOD_CACHE_CAPACITY", false},
    {"HOROVOD_TIMELINE", "KHOROVOD_TIMELINE", false},
    {"HOROVOD_STALL_CHECK_TIME_SECONDS", "KHOROVOD_STALL_CHECK_TIME_SECONDS", false},
    {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "KHOROVOD_STALL_SHUTDOWN_TIME_SECONDS", false},
    {"HOROVOD_STALL_CHECK_DISABLE", "KHOROVOD_STALL_CHECK_DISABLE", false},
    {"HOROVOD_GLOO_TIMEOUT_SECONDS", "KHOROVOD_TIMEOUT_SECONDS", false},
    {"HOROVOD_CPU_OPERATIONS", "KHOROVOD_CPU_OPERATIONS", true},
    {"HOROVOD_GPU_OPERATIONS", "KHOROVOD_GPU_OPERATIONS", true},
    {"HOROVOD_ELASTIC_TIMEOUT", "KHOROVOD_ELASTIC_TIMEOUT_SECONDS", false},
    {"HOROVOD_HOSTNAME", "KHOROVOD_HOSTNAME", false},
    {"HOROVOD_GLOO_IFACE", "KHOROVOD_NETWORK_INTERFACE", false},
};

// Set by horovodrun for its own workers; they describe Horovod's launch,
// not a user's setting, and khorovodrun sets the KHOROVOD_* ones.
bool IsLauncherVariable(const std::string& name) {
  static constexpr const char* kLauncher[] = {
      "HOROVOD_RANK",       "HOROVOD_SIZE",       "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE",
      "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE", "HOROVOD_CONTROLLER", "HOROVOD_HOSTNAME_FOR_RANK",
      "HOROVOD_ELASTIC"};
  return std::find(std::begin(kLauncher), std::end(kLauncher), name) != std::end(kLauncher);
}

// Honoured, but by the language bindings rather than the runtime's Config
// (HOROVOD_DYNAMIC_PROCESS_SETS: python/khorovod/process_sets.py).
bool IsBindingVariable(const std::string& name) { return name == "HOROVOD_DYNAMIC_PROCESS_SETS"; }

}  // namespace

std::vector<std::string> MergeHorovodAliases(std::map<std::string, std::string>* vars,
                                             const std::map<std::string, std::string>& horovod) {
  std::vector<std::string> unknown;
  for (const auto& [name, value] : horovod) {
    const auto* alias = std::find_if(std::begin(kAliases), std::end(kAliases),
                                     [&name = name](const Alias& a) { return name == a.horovod; });
    if (alias == std::end(kAliases)) {
      if (!IsLauncherVariable(name) && !IsBindingVariable(name)) unknown.push_back(name);
      continue;
    }
    std::string v = value;
    if (alias->lowercase) {
      std::transform(v.begin(), v.end(), v.begin(),
                     [](unsigned char c) { return std::tolower(c); });
    }
    vars->emplace(alias->ours, v);  // emplace keeps a KHOROVOD_* value already there
  }
  return unknown;
}

}  // namespace khorovod
