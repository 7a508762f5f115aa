// Parses KHOROVOD_* variables into Config. This is the only place in the
// runtime that reads the environment.
#include "khorovod/config.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>

#include "common/horovod_env.h"

extern char** environ;

namespace khorovod {
namespace {

class EnvReader {
 public:
  explicit EnvReader(const std::map<std::string, std::string>& env) : env_(env) {}

  const std::string* Find(const std::string& key) const {
    auto it = env_.find(key);
    return it == env_.end() || it->second.empty() ? nullptr : &it->second;
  }

  Status Int(const std::string& key, int64_t min, int64_t max, int64_t* out) const {
    const std::string* v = Find(key);
    if (!v) return Status::Ok();
    char* end = nullptr;
    errno = 0;
    long long parsed = std::strtoll(v->c_str(), &end, 10);
    if (errno != 0 || end == v->c_str() || *end != '\0' || parsed < min || parsed > max) {
      return Status::InvalidArgument(key + "='" + *v + "': expected an integer in [" +
                                     std::to_string(min) + ", " + std::to_string(max) + "]");
    }
    *out = parsed;
    return Status::Ok();
  }

  Status Double(const std::string& key, double min, double max, double* out) const {
    const std::string* v = Find(key);
    if (!v) return Status::Ok();
    char* end = nullptr;
    errno = 0;
    double parsed = std::strtod(v->c_str(), &end);
    if (errno != 0 || end == v->c_str() || *end != '\0' || !std::isfinite(parsed) || parsed < min ||
        parsed > max) {
      return Status::InvalidArgument(key + "='" + *v + "': expected a number in [" +
                                     std::to_string(min) + ", " + std::to_string(max) + "]");
    }
    *out = parsed;
    return Status::Ok();
  }

  void String(const std::string& key, std::string* out) const {
    if (const std::string* v = Find(key)) *out = *v;
  }

 private:
  const std::map<std::string, std::string>& env_;
};

Status ReadInt(const EnvReader& env, const std::string& key, int64_t min, int64_t max, int* out) {
  int64_t v = *out;
  KH_RETURN_IF_ERROR(env.Int(key, min, max, &v));
  *out = static_cast<int>(v);
  return Status::Ok();
}

Status ReadLocalRanks(const EnvReader& env, bool* by_node) {
  const std::string* v = env.Find("KHOROVOD_LOCAL_RANKS");
  if (!v || v->empty() || *v == "pod" || *v == "host") {
    *by_node = false;
  } else if (*v == "node") {
    *by_node = true;
  } else {
    return Status::InvalidArgument("KHOROVOD_LOCAL_RANKS='" + *v + "': expected pod or node");
  }
  return Status::Ok();
}

Status ReadSpinWaits(const EnvReader& env, SpinWaits* out) {
  const std::string* v = env.Find("KHOROVOD_SPIN_WAITS");
  if (!v) return Status::Ok();
  if (*v == "auto") {
    *out = SpinWaits::kAuto;
  } else if (*v == "on") {
    *out = SpinWaits::kOn;
  } else if (*v == "off") {
    *out = SpinWaits::kOff;
  } else {
    return Status::InvalidArgument("KHOROVOD_SPIN_WAITS='" + *v + "': expected auto, on or off");
  }
  return Status::Ok();
}

// KHOROVOD_STALL_CHECK_DISABLE as Horovod reads HOROVOD_STALL_CHECK_DISABLE
// (an integer > 0 disables), plus the usual words for a boolean.
Status ReadStallCheckDisable(const EnvReader& env, bool* stall_check) {
  const std::string* v = env.Find("KHOROVOD_STALL_CHECK_DISABLE");
  if (!v) return Status::Ok();
  std::string word = *v;
  for (char& ch : word) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  char* end = nullptr;
  const long number = std::strtol(word.c_str(), &end, 10);
  if (end != word.c_str() && *end == '\0') {
    *stall_check = number <= 0;
  } else if (word == "true" || word == "yes" || word == "on") {
    *stall_check = false;
  } else if (word == "false" || word == "no" || word == "off") {
    *stall_check = true;
  } else {
    return Status::InvalidArgument("KHOROVOD_STALL_CHECK_DISABLE='" + *v +
                                   "': expected 1 or 0 (true or false)");
  }
  return Status::Ok();
}

Status ReadSeconds(const EnvReader& env, const std::string& key, double min,
                   std::chrono::milliseconds* out) {
  double seconds = static_cast<double>(out->count()) / 1000.0;
  KH_RETURN_IF_ERROR(env.Double(key, min, 1e6, &seconds));
  *out = std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
  return Status::Ok();
}

Status ReadStallCheck(const EnvReader& env, Config* c) {
  KH_RETURN_IF_ERROR(ReadStallCheckDisable(env, &c->stall_check));
  KH_RETURN_IF_ERROR(
      ReadSeconds(env, "KHOROVOD_STALL_CHECK_TIME_SECONDS", 0.001, &c->stall_warning_time));
  return ReadSeconds(env, "KHOROVOD_STALL_SHUTDOWN_TIME_SECONDS", 0.0, &c->stall_shutdown_time);
}

// <hostname>-<pid>, restricted to the characters worker names allow.
std::string DefaultWorkerName() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string name = std::string(host) + "-" + std::to_string(getpid());
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '_' && ch != '-')
      ch = '-';
  }
  return name;
}

}  // namespace

Status Config::Validate() const {
  if (size < 1)
    return Status::InvalidArgument("KHOROVOD_SIZE must be >= 1, got " + std::to_string(size));
  if (rank < 0 || rank >= size) {
    return Status::InvalidArgument("KHOROVOD_RANK=" + std::to_string(rank) +
                                   " outside [0, KHOROVOD_SIZE=" + std::to_string(size) + ")");
  }
  if (local_size < 1 || local_rank < 0 || local_rank >= local_size) {
    return Status::InvalidArgument(
        "KHOROVOD_LOCAL_RANK=" + std::to_string(local_rank) +
        " outside [0, KHOROVOD_LOCAL_SIZE=" + std::to_string(local_size) + ")");
  }
  if (cross_size < 1 || cross_rank < 0 || cross_rank >= cross_size) {
    return Status::InvalidArgument(
        "KHOROVOD_CROSS_RANK=" + std::to_string(cross_rank) +
        " outside [0, KHOROVOD_CROSS_SIZE=" + std::to_string(cross_size) + ")");
  }
  if (!store_addr.empty() && elastic()) {
    return Status::InvalidArgument(
        "KHOROVOD_STORE_ADDR and KHOROVOD_RENDEZVOUS_ADDR exclude each other");
  }
  if (!store_addr.empty() && rendezvous_token.empty()) {
    return Status::InvalidArgument(
        "KHOROVOD_STORE_ADDR needs the job's token (KHOROVOD_RENDEZVOUS_TOKEN or _FILE)");
  }
  if (size > 1 && store_path.empty() && store_addr.empty() && !elastic()) {
    return Status::InvalidArgument(
        "KHOROVOD_STORE_PATH is required when size > 1 (start the job with khorovodrun)");
  }
  if (gpu_device < -1)
    return Status::InvalidArgument("gpu_device must be >= 0, or -1 for local_rank");
  if (job_id.empty()) return Status::InvalidArgument("job_id must not be empty");
  if (cycle_time.count() < 0) return Status::InvalidArgument("cycle_time must be >= 0");
  if (stall_warning_time.count() <= 0)
    return Status::InvalidArgument("stall_warning_time must be > 0");
  if (stall_shutdown_time.count() < 0)
    return Status::InvalidArgument("stall_shutdown_time must be >= 0");
  if (transport_timeout.count() <= 0)
    return Status::InvalidArgument("transport_timeout must be > 0");
  if (metrics_port < 0 || metrics_port > 65535) {
    return Status::InvalidArgument("KHOROVOD_METRICS_PORT=" + std::to_string(metrics_port) +
                                   " outside [0, 65535]");
  }
  if (!(baseline_samples_per_second >= 0)) {
    return Status::InvalidArgument("KHOROVOD_BASELINE_SAMPLES_PER_SECOND must be >= 0");
  }
  return Status::Ok();
}

StatusOr<Config> Config::FromMap(const std::map<std::string, std::string>& vars) {
  EnvReader env(vars);
  Config c;
  constexpr int64_t kMaxRanks = 1 << 20;
  KH_RETURN_IF_ERROR(ReadInt(env, "KHOROVOD_SIZE", 1, kMaxRanks, &c.size));
  KH_RETURN_IF_ERROR(ReadInt(env, "KHOROVOD_RANK", 0, kMaxRanks, &c.rank));
  c.local_rank = c.rank;
  c.local_size = c.size;
  KH_RETURN_IF_ERROR(ReadInt(env, "KHOROVOD_LOCAL_SIZE", 1, kMaxRanks, &c.local_size));
  KH_RETURN_IF_ERROR(ReadInt(env, "KHOROVOD_LOCAL_RANK", 0, kMaxRanks, &c.local_rank));
  KH_RETURN_IF_ERROR(ReadInt(env, "KHOROVOD_CROSS_SIZE", 1, kMaxRanks, &c.cross_size));
  KH_RETURN_IF_ERROR(ReadInt(env, "KHOROVOD_CROSS_RANK", 0, kMaxRanks, &c.cross_rank));
  env.String("KHOROVOD_STORE_PATH", &c.store_path);
  env.String("KHOROVOD_JOB_ID", &c.job_id);
  env.String("KHOROVOD_HOSTNAME", &c.hostname);
  env.String("KHOROVOD_NETWORK_INTERFACE", &c.network_interface);
  env.String("KHOROVOD_STORE_ADDR", &c.store_addr);
  env.String("KHOROVOD_CPU_OPERATIONS", &c.cpu_backend);
  env.String("KHOROVOD_GPU_OPERATIONS", &c.gpu_backend);
  KH_RETURN_IF_ERROR(ReadInt(env, "KHOROVOD_GPU_DEVICE", 0, 1 << 16, &c.gpu_device));
  int gpu_share = 0;
  KH_RETURN_IF_ERROR(ReadInt(env, "KHOROVOD_GPU_SHARE", 0, 1, &gpu_share));
  c.gpu_share = gpu_share == 1;
  env.String("KHOROVOD_NCCL_LIBRARY", &c.nccl_library);
  KH_RETURN_IF_ERROR(ReadSpinWaits(env, &c.spin_waits));
  env.String("KHOROVOD_RENDEZVOUS_ADDR", &c.rendezvous_addr);
  env.String("KHOROVOD_RENDEZVOUS_TOKEN", &c.rendezvous_token);
  if (const std::string* file = env.Find("KHOROVOD_RENDEZVOUS_TOKEN_FILE");
      file && c.rendezvous_token.empty()) {
    std::ifstream in(*file);
    if (!in || !std::getline(in, c.rendezvous_token) || c.rendezvous_token.empty()) {
      return Status::InvalidArgument("KHOROVOD_RENDEZVOUS_TOKEN_FILE='" + *file +
                                     "': cannot read a token from it");
    }
  }
  env.String("KHOROVOD_WORKER_NAME", &c.worker_name);
  KH_RETURN_IF_ERROR(ReadInt(env, "KHOROVOD_SLOTS", 1, 1 << 16, &c.slots));
  KH_RETURN_IF_ERROR(ReadInt(env, "KHOROVOD_LOCAL_SLOT", 0, (1 << 16) - 1, &c.local_slot));
  env.String("KHOROVOD_NODE_NAME", &c.node_name);
  KH_RETURN_IF_ERROR(ReadLocalRanks(env, &c.local_ranks_by_node));
  if (c.worker_name.empty()) c.worker_name = DefaultWorkerName();
  double elastic_s = c.elastic_timeout.count() / 1000.0;
  KH_RETURN_IF_ERROR(env.Double("KHOROVOD_ELASTIC_TIMEOUT_SECONDS", 0.001, 1e7, &elastic_s));
  c.elastic_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(std::llround(elastic_s * 1000.0)));
  KH_RETURN_IF_ERROR(
      ReadSeconds(env, "KHOROVOD_TERMINATION_GRACE_SECONDS", 0.0, &c.termination_grace));

  int64_t fusion = static_cast<int64_t>(c.fusion_threshold_bytes);
  KH_RETURN_IF_ERROR(env.Int("KHOROVOD_FUSION_THRESHOLD", 0, int64_t{1} << 40, &fusion));
  c.fusion_threshold_bytes = static_cast<size_t>(fusion);

  double cycle_ms = c.cycle_time.count() / 1000.0;
  KH_RETURN_IF_ERROR(env.Double("KHOROVOD_CYCLE_TIME", 0.0, 10'000.0, &cycle_ms));
  c.cycle_time = std::chrono::microseconds(static_cast<int64_t>(std::llround(cycle_ms * 1000.0)));

  int64_t cache = static_cast<int64_t>(c.cache_capacity);
  KH_RETURN_IF_ERROR(env.Int("KHOROVOD_CACHE_CAPACITY", 0, 1 << 20, &cache));
  c.cache_capacity = static_cast<size_t>(cache);

  KH_RETURN_IF_ERROR(ReadStallCheck(env, &c));

  double timeout_s = c.transport_timeout.count() / 1000.0;
  KH_RETURN_IF_ERROR(env.Double("KHOROVOD_TIMEOUT_SECONDS", 0.001, 1e6, &timeout_s));
  c.transport_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(std::llround(timeout_s * 1000.0)));

  KH_RETURN_IF_ERROR(ReadInt(env, "KHOROVOD_METRICS_PORT", 0, 65535, &c.metrics_port));
  env.String("KHOROVOD_METRICS_HOST", &c.metrics_host);
  KH_RETURN_IF_ERROR(env.Double("KHOROVOD_BASELINE_SAMPLES_PER_SECOND", 0.0, 1e15,
                                &c.baseline_samples_per_second));
  env.String("KHOROVOD_TIMELINE", &c.timeline_path);

  KH_RETURN_IF_ERROR(c.Validate());
  return c;
}

StatusOr<Config> Config::FromEnvironment() {
  std::map<std::string, std::string> vars, horovod;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    const bool ours = entry.rfind("KHOROVOD_", 0) == 0;
    if (!ours && entry.rfind("HOROVOD_", 0) != 0) continue;
    size_t eq = entry.find('=');
    if (eq != std::string::npos)
      (ours ? vars : horovod).emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  const std::vector<std::string> unknown = MergeHorovodAliases(&vars, horovod);
  // One warning per process (elastic jobs read the environment at every
  // reset); the user set these expecting an effect they will not get.
  static std::atomic<bool> warned{false};
  if (!unknown.empty() && !warned.exchange(true)) {
    std::string names;
    for (const auto& n : unknown) names += (names.empty() ? "" : ", ") + n;
    std::fprintf(stderr,
                 "khorovod: warning: ignoring %s (no equivalent in khorovod; see docs/python.md)\n",
                 names.c_str());
  }
  return FromMap(vars);
}

}  // namespace khorovod
