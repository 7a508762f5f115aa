#include "launcher/worker_env.h"

#include <algorithm>
#include <array>

extern char** environ;  // POSIX; not declared by <unistd.h> without _GNU_SOURCE

namespace khorovod::launcher {
namespace {

constexpr std::array<std::string_view, 9> kContractNames = {
    "KHOROVOD_RANK",       "KHOROVOD_SIZE",       "KHOROVOD_LOCAL_RANK",
    "KHOROVOD_LOCAL_SIZE", "KHOROVOD_CROSS_RANK", "KHOROVOD_CROSS_SIZE",
    "KHOROVOD_STORE_PATH", "KHOROVOD_JOB_ID",     "KHOROVOD_HOSTNAME",
};

std::string_view NameOf(std::string_view entry) { return entry.substr(0, entry.find('=')); }

void upsert(std::vector<EnvVar>& vars, EnvVar var) {
  auto it =
      std::find_if(vars.begin(), vars.end(), [&](const EnvVar& v) { return v.first == var.first; });
  if (it != vars.end()) {
    it->second = std::move(var.second);
  } else {
    vars.push_back(std::move(var));
  }
}

}  // namespace

bool IsContractVariable(std::string_view name) {
  return std::find(kContractNames.begin(), kContractNames.end(), name) != kContractNames.end();
}

namespace {

// The placement and host under PREFIX (KHOROVOD_ or HOROVOD_): the same
// values under the two names.
std::vector<EnvVar> PlacementVariables(const std::string& prefix, const ContractParams& p) {
  return {
      {prefix + "RANK", std::to_string(p.rank)},
      {prefix + "SIZE", std::to_string(p.size)},
      {prefix + "LOCAL_RANK", std::to_string(p.local_rank)},
      {prefix + "LOCAL_SIZE", std::to_string(p.local_size)},
      {prefix + "CROSS_RANK", std::to_string(p.cross_rank)},
      {prefix + "CROSS_SIZE", std::to_string(p.cross_size)},
      {prefix + "HOSTNAME", p.hostname},
  };
}

}  // namespace

std::vector<EnvVar> ContractVariables(const ContractParams& p) {
  std::vector<EnvVar> vars = PlacementVariables("KHOROVOD_", p);
  vars.push_back({"KHOROVOD_STORE_PATH", p.store_path});
  vars.push_back({"KHOROVOD_JOB_ID", p.job_id});
  return vars;
}

std::vector<EnvVar> HorovodVariables(const ContractParams& p) {
  return PlacementVariables("HOROVOD_", p);
}

std::vector<EnvVar> ElasticHorovodVariables(const std::string& hostname,
                                            const std::optional<Placement>& spawn) {
  std::vector<EnvVar> vars;
  if (spawn) {
    ContractParams p;
    static_cast<Placement&>(p) = *spawn;
    p.hostname = hostname;
    vars = HorovodVariables(p);
  } else {
    vars.push_back({"HOROVOD_HOSTNAME", hostname});
  }
  vars.push_back({"HOROVOD_ELASTIC", "1"});
  return vars;
}

ContractParams SingleHostParams(int rank, int size, std::string store_path, std::string job_id,
                                std::string hostname) {
  ContractParams p;
  static_cast<Placement&>(p) = Placement{rank, size, rank, size, 0, 1};
  p.store_path = std::move(store_path);
  p.job_id = std::move(job_id);
  p.hostname = std::move(hostname);
  return p;
}

ResolvedExtraEnv ResolveExtraEnv(const std::vector<EnvSpec>& specs,
                                 const std::vector<std::string>& base_env) {
  ResolvedExtraEnv out;
  for (const auto& spec : specs) {
    if (spec.value) {
      upsert(out.vars, {spec.name, *spec.value});
      continue;
    }
    // Last occurrence wins, matching how a shell or getenv(3) would see
    // a duplicated entry in practice (there should be none).
    auto it = std::find_if(base_env.rbegin(), base_env.rend(),
                           [&](const std::string& e) { return NameOf(e) == spec.name; });
    if (it == base_env.rend()) {
      if (std::find(out.missing.begin(), out.missing.end(), spec.name) == out.missing.end()) {
        out.missing.push_back(spec.name);
      }
      continue;
    }
    upsert(out.vars, {spec.name, it->substr(spec.name.size() + 1)});
  }
  return out;
}

std::vector<std::string> MergeEnvironment(const std::vector<std::string>& base_env,
                                          const std::vector<EnvVar>& overrides) {
  std::vector<std::string> merged;
  merged.reserve(base_env.size() + overrides.size());
  for (const auto& entry : base_env) {
    const auto name = NameOf(entry);
    const bool overridden = std::any_of(overrides.begin(), overrides.end(),
                                        [&](const EnvVar& v) { return v.first == name; });
    if (!overridden) merged.push_back(entry);
  }
  // Overrides may themselves repeat a name (extra env then contract); the
  // last one must win, so emit only the final occurrence of each name.
  for (std::size_t i = 0; i < overrides.size(); ++i) {
    const bool superseded =
        std::any_of(overrides.begin() + static_cast<std::ptrdiff_t>(i) + 1, overrides.end(),
                    [&](const EnvVar& v) { return v.first == overrides[i].first; });
    if (!superseded) merged.push_back(overrides[i].first + "=" + overrides[i].second);
  }
  return merged;
}

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

}  // namespace khorovod::launcher
