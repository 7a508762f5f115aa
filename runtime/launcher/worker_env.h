// Worker env: the environment every worker process is started with.
//
// Contract with the runtime (which reads these at init):
//   KHOROVOD_RANK        global rank, 0..SIZE-1
//   KHOROVOD_SIZE        number of workers in the job
//   KHOROVOD_LOCAL_RANK  rank among the workers on this host
//   KHOROVOD_LOCAL_SIZE  number of workers on this host
//   KHOROVOD_CROSS_RANK  index of this host among the job's hosts
//   KHOROVOD_CROSS_SIZE  number of hosts
//   KHOROVOD_STORE_PATH  directory of the file-store rendezvous
//   KHOROVOD_JOB_ID      id shared by all workers of one job
//   KHOROVOD_HOSTNAME    address the worker advertises to its peers
// A worker gets the launcher's environment, then `-x` variables, then the
// contract variables above (which `-x` may not override).
//
// Horovod's own variables, as horovodrun's gloo_run exports them, so scripts
// that read them before init() work unchanged:
//   static jobs:  HOROVOD_RANK, HOROVOD_SIZE, HOROVOD_LOCAL_RANK,
//                 HOROVOD_LOCAL_SIZE, HOROVOD_CROSS_RANK, HOROVOD_CROSS_SIZE,
//                 HOROVOD_HOSTNAME (the values of the KHOROVOD_* ones)
//   elastic jobs: HOROVOD_HOSTNAME, HOROVOD_ELASTIC=1 and, when the launcher
//                 knows the slot it spawns into, the other six with the
//                 spawn-time placement Horovod's driver exports
//                 (spawn_placement.h). The rendezvous assigns ranks per
//                 generation, so they need not stay true: hvd.rank() after
//                 init() is authoritative.
//
// Everything here is pure: environments are plain vectors of "NAME=VALUE".
//
// Thread-safety: pure functions (CurrentEnvironment() reads environ, which
// nothing in the launcher writes); safe from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "khorovod/placement.h"
#include "launcher/launch_options.h"

namespace khorovod::launcher {

using EnvVar = std::pair<std::string, std::string>;

// True for the names in the contract above.
bool IsContractVariable(std::string_view name);

// A worker's placement and where it finds its peers.
struct ContractParams : Placement {
  std::string store_path;
  std::string job_id;
  std::string hostname;
};

// The contract variables for one worker, in the order documented above.
std::vector<EnvVar> ContractVariables(const ContractParams& params);

// Horovod's names for a static worker's placement (see the header comment).
std::vector<EnvVar> HorovodVariables(const ContractParams& params);
// Horovod's variables for an elastic worker (see the header comment).
// `spawn`: the slot's spawn-time placement, when known.
std::vector<EnvVar> ElasticHorovodVariables(const std::string& hostname,
                                            const std::optional<Placement>& spawn = std::nullopt);

// Single-host layout used by khorovodrun: local == global, one host.
ContractParams SingleHostParams(int rank, int size, std::string store_path, std::string job_id,
                                std::string hostname);

struct ResolvedExtraEnv {
  std::vector<EnvVar> vars;
  // `-x NAME` entries whose NAME is not set in the base environment; they
  // are skipped (the launcher warns about them).
  std::vector<std::string> missing;
};

// Turns `-x` specs into concrete variables, looking pass-through names up in
// `base_env`. A later spec for the same NAME replaces an earlier one.
ResolvedExtraEnv ResolveExtraEnv(const std::vector<EnvSpec>& specs,
                                 const std::vector<std::string>& base_env);

// `base_env` with every name in `overrides` replaced (or added, in order).
std::vector<std::string> MergeEnvironment(const std::vector<std::string>& base_env,
                                          const std::vector<EnvVar>& overrides);

// Snapshot of this process's `environ`.
std::vector<std::string> CurrentEnvironment();

}  // namespace khorovod::launcher
