#include "launcher/refused_flags.h"

#include <algorithm>
#include <iterator>

namespace khorovod::launcher {
namespace {

struct Refused {
  const char* names;  // CLI11 names: "-p,--ssh-port"
  bool takes_value;
  const char* reason;
};

constexpr const char* kMpi = "khorovod has no MPI or jsrun mode; workers use Gloo (drop the flag)";
constexpr const char* kAutotune =
    "khorovod has no autotuner; set --fusion-threshold-mb and --cycle-time-ms instead";
constexpr const char* kHierarchical =
    "khorovod has no hierarchical switch: its shm backend (KHOROVOD_CPU_OPERATIONS=auto or shm) is "
    "hierarchical across hosts for tensors up to 4 MiB and, for larger ones, where a timed trial "
    "of both paths finds it faster; KHOROVOD_CPU_OPERATIONS=gloo keeps every allreduce on the flat "
    "ring";

constexpr Refused kRefused[] = {
    {"--check-build", false,
     "khorovod has one build: Gloo and shared memory, NCCL when compiled in; ask "
     "khorovod.torch.nccl_built() / gloo_built() instead"},
    {"--config-file", true, "khorovodrun reads no YAML config file; pass the settings as flags"},
    {"--hierarchical-allreduce", false, kHierarchical},
    {"--no-hierarchical-allreduce", false, kHierarchical},
    {"--hierarchical-allgather", false, kHierarchical},
    {"--no-hierarchical-allgather", false, kHierarchical},
    {"--torus-allreduce", false, "khorovod has no torus allreduce"},
    {"--no-torus-allreduce", false, "khorovod has no torus allreduce"},
    {"--autotune", false, kAutotune},
    {"--no-autotune", false, kAutotune},
    {"--autotune-log-file", true, kAutotune},
    {"--autotune-warmup-samples", true, kAutotune},
    {"--autotune-steps-per-sample", true, kAutotune},
    {"--autotune-bayes-opt-max-samples", true, kAutotune},
    {"--autotune-gaussian-process-noise", true, kAutotune},
    {"--timeline-mark-cycles", false, "khorovod's timeline has no cycle markers"},
    {"--mpi-threads-disable", false, kMpi},
    {"--no-mpi-threads-disable", false, kMpi},
    {"--mpi-args", true, kMpi},
    {"--tcp", false, kMpi},
    {"--binding-args", true, kMpi},
    {"--jsrun", false, kMpi},
    {"--mpi", false, kMpi},
    {"--num-nccl-streams", true, "khorovod's NCCL backend uses one stream per device"},
    {"--thread-affinity", true, "khorovod does not pin its background thread"},
    {"--log-with-timestamp", false, "khorovod's log lines carry no timestamp"},
    {"--no-log-hide-timestamp", false, "khorovod's log lines carry no timestamp"},
    {"--prefix-output-with-timestamp", false,
     "khorovodrun prefixes output with the rank only, not a timestamp"},
};

std::string LongName(const char* names) {
  const std::string all = names;
  const auto comma = all.find(',');
  return comma == std::string::npos ? all : all.substr(comma + 1);
}

}  // namespace

void AddRefusedFlags(CLI::App& app, RefusedFlags& refused) {
  for (const Refused& r : kRefused) {
    const std::string name = LongName(r.names);
    auto record = [&refused, name](auto&&...) { refused.given.push_back(name); };
    CLI::Option* opt =
        r.takes_value ? app.add_option(r.names, refused.value_sink) : app.add_flag(r.names);
    opt->description(std::string("horovodrun: refused; ") + r.reason)
        ->group("Refused horovodrun flags");
    opt->each([record](const std::string&) { record(); });
    if (!r.takes_value) opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
}

Status RefusalOf(const RefusedFlags& refused) {
  if (refused.given.empty()) return Status::Ok();
  const std::string& name = refused.given.front();
  const auto* r = std::find_if(std::begin(kRefused), std::end(kRefused),
                               [&](const Refused& x) { return LongName(x.names) == name; });
  return Status::InvalidArgument(name + ": " + r->reason);
}

std::string NormalizeSingleDashFlag(const std::string& token) {
  static constexpr const char* kSingleDash[] = {"-np", "-cb", "-hostfile", "-prefix-timestamp"};
  for (const char* flag : kSingleDash) {
    const std::string f = flag;
    if (token == f) {
      if (f == "-cb") return "--check-build";
      if (f == "-prefix-timestamp") return "--prefix-output-with-timestamp";
      return "-" + f;
    }
    if (token.rfind(f + "=", 0) == 0) return "-" + token;
  }
  return token;
}

}  // namespace khorovod::launcher
