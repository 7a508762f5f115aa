// Config: every runtime setting, parsed once from KHOROVOD_* environment
// variables (or filled by the caller) and then passed by value. Nothing else
// in the runtime reads the environment.
//
// Environment variables (defaults in brackets):
//   KHOROVOD_RANK, KHOROVOD_SIZE              [0, 1]
//   KHOROVOD_LOCAL_RANK, KHOROVOD_LOCAL_SIZE  [rank, size]
//   KHOROVOD_CROSS_RANK, KHOROVOD_CROSS_SIZE  [0, 1]
//   KHOROVOD_STORE_PATH       directory of the job's file-store rendezvous;
//                             required when size > 1
//   KHOROVOD_JOB_ID           namespace for rendezvous keys ["khorovod"]
//   KHOROVOD_HOSTNAME         address the data-plane listens on ["127.0.0.1"]
//   KHOROVOD_FUSION_THRESHOLD bytes per fused buffer [134217728]; 0 disables fusion
//   KHOROVOD_CYCLE_TIME       milliseconds between negotiation rounds, may be
//                             fractional [1]
//   KHOROVOD_CACHE_CAPACITY   response-cache entries [1024]; 0 disables the cache
//   KHOROVOD_STALL_CHECK_TIME_SECONDS  a tensor not submitted by every rank
//                             within this time fails with kStalled [60]
//   KHOROVOD_TIMEOUT_SECONDS  bound on any single transport operation [30]
//   KHOROVOD_CPU_OPERATIONS   data-plane backend for host tensors: "gloo",
//                             "shm" (shared memory among one host's ranks;
//                             hierarchical across hosts of equal rank counts),
//                             or "auto": shm when some host runs several
//                             ranks (size > cross_size), else gloo ["auto"]
//   KHOROVOD_GPU_OPERATIONS   backend for device tensors: "nccl", "staging"
//                             (device -> host -> CPU backend -> device), or
//                             "auto": nccl when built, else staging ["auto"]
//   KHOROVOD_GPU_DEVICE       GPU ordinal this process uses [local_rank]
//   KHOROVOD_SPIN_WAITS       whether waits spin briefly before sleeping:
//                             "on", "off", or "auto": spin only while this
//                             process may run on at least local_size cores.
//                             "on" by default: on an oversubscribed 2-vCPU
//                             host "auto" measured slower for small
//                             allreduces (docs/benchmarks.md) ["on"]
// Elastic jobs (set by khorovodrun --min-np/--max-np or the operator):
//   KHOROVOD_RENDEZVOUS_ADDR  HOST:PORT of the job's khorovod-rendezvous server;
//                             when set, rank and size come from the server
//   KHOROVOD_RENDEZVOUS_TOKEN, KHOROVOD_RENDEZVOUS_TOKEN_FILE  the job's token
//   KHOROVOD_WORKER_NAME      this worker's unique name [<host>-<pid>]
//   KHOROVOD_SLOTS            worker processes this host may run [1]
//   KHOROVOD_LOCAL_SLOT       this process's slot on its host (khorovod-slots
//                             sets it): its local_rank when every worker of
//                             the host declares a distinct one [none]
//   KHOROVOD_ELASTIC_TIMEOUT_SECONDS  longest wait for a generation [600]
// Observability (docs/observability.md):
//   KHOROVOD_METRICS_PORT     serve Prometheus metrics at GET /metrics on this
//                             port [0: off]
//   KHOROVOD_METRICS_HOST     address the metrics endpoint binds ["0.0.0.0"]
//   KHOROVOD_BASELINE_SAMPLES_PER_SECOND  one worker's throughput alone, for
//                             the throughput scaling efficiency [0: unknown]
//   KHOROVOD_TIMELINE         write a Chrome-trace timeline to this path [off]
//
// Thread-safety: a value type.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>

#include "khorovod/placement.h"
#include "khorovod/status.h"

namespace khorovod {

// KHOROVOD_SPIN_WAITS (common/waiter_signal.h).
enum class SpinWaits { kAuto, kOn, kOff };

// The Placement part is this process's place in the world (from
// KHOROVOD_RANK ... or, in an elastic job, from each generation's assignment).
struct Config : Placement {
  std::string store_path;
  std::string job_id = "khorovod";
  std::string hostname = "127.0.0.1";
  // KHOROVOD_NETWORK_INTERFACE (Horovod: HOROVOD_GLOO_IFACE): the NIC whose
  // address Gloo binds and advertises to peers; empty: `hostname`'s address.
  std::string network_interface;
  // KHOROVOD_STORE_ADDR HOST:PORT: a static job whose peers meet through the
  // key-value store (generation 0) of khorovodrun's rendezvous server instead
  // of a shared directory (multi-host khorovodrun); authenticated with
  // rendezvous_token. Not elastic: the ranks stay those of the environment.
  std::string store_addr;

  size_t fusion_threshold_bytes = 128u << 20;
  std::chrono::microseconds cycle_time{1000};
  size_t cache_capacity = 1024;
  // Horovod's stall check (core/stall_inspector.h): a tensor some ranks have
  // not submitted for stall_warning_time is reported on rank 0's stderr
  // (KHOROVOD_/HOROVOD_STALL_CHECK_TIME_SECONDS); past stall_shutdown_time,
  // when > 0, the job shuts down and pending operations fail with kAborted
  // (..._STALL_SHUTDOWN_TIME_SECONDS); stall_check false turns both off
  // (..._STALL_CHECK_DISABLE).
  bool stall_check = true;
  std::chrono::milliseconds stall_warning_time{60'000};
  std::chrono::milliseconds stall_shutdown_time{0};
  std::chrono::milliseconds transport_timeout{30'000};
  // "auto": shm when some host runs several ranks (size > cross_size).
  std::string cpu_backend = "auto";
  std::string gpu_backend = "auto";
  int gpu_device = -1;  // -1: local_rank modulo the visible devices
  // KHOROVOD_GPU_SHARE=1: let several ranks use one GPU through NCCL (tests
  // and benchmarks on one GPU; backend/nccl/nccl_formation.h). Off: refused.
  bool gpu_share = false;
  // KHOROVOD_NCCL_LIBRARY: the libnccl.so.2 to load; empty: search
  // (backend/nccl/nccl_library.h).
  std::string nccl_library;
  SpinWaits spin_waits = SpinWaits::kOn;

  std::string rendezvous_addr;
  std::string rendezvous_token;
  std::string worker_name;
  int slots = 1;
  int local_slot = -1;  // -1: not declared
  // KHOROVOD_NODE_NAME: the machine this worker runs on (the operator sets
  // it from the pod's spec.nodeName); "" if unknown. Sent to the rendezvous
  // when local_ranks_by_node.
  std::string node_name;
  // KHOROVOD_LOCAL_RANKS=node: local_rank, local_size, cross_rank and
  // cross_size (the API's) count the workers of this node instead of this
  // host (address, a pod on Kubernetes), as the rendezvous assigns them
  // (rendezvous/world.h). The backends keep the host grouping: only the
  // ranks of one address share memory. "pod" (the default): by host.
  bool local_ranks_by_node = false;
  std::chrono::milliseconds elastic_timeout{600'000};
  // KHOROVOD_TERMINATION_GRACE_SECONDS: after SIGTERM, how long an elastic
  // worker that commits waits for its next commit to leave there (the
  // survivors then re-form without rolling back); past it, it leaves at
  // once. Keep it below the pod's terminationGracePeriodSeconds (30 s).
  std::chrono::milliseconds termination_grace{20'000};

  int metrics_port = 0;  // 0: no metrics endpoint
  std::string metrics_host = "0.0.0.0";
  double baseline_samples_per_second = 0;  // 0: unknown
  std::string timeline_path;               // empty: no timeline

  bool elastic() const { return !rendezvous_addr.empty(); }

  // Checks ranges and cross-field constraints (rank < size, ...).
  Status Validate() const;

  // Reads the process environment.
  static StatusOr<Config> FromEnvironment();
  // Same, from an explicit map (used by tests and by FromEnvironment).
  static StatusOr<Config> FromMap(const std::map<std::string, std::string>& env);
};

}  // namespace khorovod
