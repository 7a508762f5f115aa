// HorovodJob v1alpha1: the API types the operator reconciles.
//
// These structs are the operator's typed view of a HorovodJob object. The
// worker pod template is kept as JSON (a core/v1 PodTemplateSpec): the
// operator adds to it but never needs to understand all of it.
// Defaults (defaults.cc) and validation (validation.cc) live apart from the
// controller; crds/horovodjob.yaml encodes the same defaults and bounds for
// the API server. docs/api.md documents every field.
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/phase.h"

namespace khorovod::op {

using Json = nlohmann::json;

inline constexpr const char* kGroup = "khorovod.dev";
inline constexpr const char* kVersion = "v1alpha1";
inline constexpr const char* kApiVersion = "khorovod.dev/v1alpha1";
inline constexpr const char* kKind = "HorovodJob";
inline constexpr const char* kPlural = "horovodjobs";

// Labels the operator puts on everything it creates.
inline constexpr const char* kLabelJobName = "khorovod.dev/job-name";
inline constexpr const char* kLabelRole = "khorovod.dev/role";  // "worker" | "rendezvous"
inline constexpr const char* kLabelWorkerIndex = "khorovod.dev/worker-index";

// GPUs: the extended resource NVIDIA's device plugin advertises, and the exit
// code a worker uses to say its GPU failed (the slot entrypoint exports it to
// the training program as KHOROVOD_GPU_ERROR_EXIT_CODE). A GPU failure is
// retried under every restartPolicy but Never, and the job avoids the
// worker's node for schedulingPolicy.nodeCooldownSeconds (docs/api.md).
inline constexpr const char* kGpuResource = "nvidia.com/gpu";
inline constexpr int kGpuErrorExitCode = 121;

enum class CleanPodPolicy { kRunning, kAll, kNone };
// What to do with a worker pod that failed:
//   kOnFailure  replace it (while backoffLimit allows);
//   kNever      fail the job;
//   kExitCode   replace it only for retryable exit codes (128-255, signals
//               such as OOM-kill or eviction); 1-127 fail the job at once.
enum class RestartPolicy { kOnFailure, kNever, kExitCode };

struct RendezvousSpec {
  int32_t port = 29400;
  std::string image;  // default: the first worker container's image
  int32_t settle_ms = 1000;
  int32_t heartbeat_timeout_ms = 5000;
  int32_t elastic_timeout_ms = 600000;
  int32_t reset_limit = -1;  // -1: unlimited
};

struct RunPolicy {
  CleanPodPolicy clean_pod_policy = CleanPodPolicy::kRunning;
  std::optional<int32_t> ttl_seconds_after_finished;
  std::optional<int64_t> active_deadline_seconds;
  int32_t backoff_limit = 6;
  bool suspend = false;
  RestartPolicy restart_policy = RestartPolicy::kOnFailure;
  // How long a worker's node may be NotReady/Unknown (or carry the
  // unreachable/not-ready taint) before the operator force-deletes the
  // worker pods bound to it and re-creates them on other nodes, instead of
  // waiting for the taint eviction (300 s by default). The clock starts when
  // the node lifecycle controller marks the node (after its own grace period,
  // 40-50 s of silence); the rendezvous has long dropped the node's workers
  // by then (heartbeatTimeoutMs), so the survivors train on meanwhile. 30 s
  // rides out a kubelet or container-runtime restart that flips the node
  // NotReady briefly, and bounds a node loss at about 80 s. 0: at once.
  int32_t node_loss_timeout_seconds = 30;
};

// Where a job's worker pods go relative to each other:
//   kPack    prefer nodes that already run this job's workers (fewest nodes:
//            ranks of one node talk over shared memory/NVLink, and whole GPU
//            nodes stay free for other jobs); the default for GPU jobs;
//   kSpread  spread them over nodes and zones (a lost node or zone takes few
//            ranks); the default for CPU jobs, whose ranks gain little from
//            sharing a node and lose the most when one node takes many;
//   kNone    leave it to the scheduler.
enum class Placement { kNone, kPack, kSpread };

// What a worker's local_rank, local_size, cross_rank and cross_size count
// (KHOROVOD_LOCAL_RANKS, rendezvous/world.h):
//   kPod   the slots of its pod, pods numbered across the job: Horovod's
//          under mpi-operator (its hostfile lists pods), and what
//          set_device(local_rank) needs in a pod that sees only its GPUs;
//   kNode  the job's ranks on its node, nodes numbered across the job.
// Either way only the ranks of one pod share memory.
enum class LocalRanks { kPod, kNode };

struct SchedulingPolicy {
  std::string scheduler_name;
  std::string priority_class_name;
  bool gang = false;                     // create a scheduler-plugins PodGroup
  std::optional<int32_t> min_available;  // PodGroup minMember; default minReplicas
  std::optional<Placement> placement;    // unset: EffectivePlacement()
  int32_t node_cooldown_seconds = 600;   // how long a GPU failure keeps the job off a node
};

// The longest job name whose derived names fit Kubernetes' limits: worker pod
// hostnames "<job>-worker-<index>" (index < 10000) are DNS labels of at most
// 63 characters. The CRD refuses longer names at admission (CEL on
// metadata.name) and Validate() refuses them for objects stored before that.
inline constexpr size_t kMaxJobNameLength = 63 - (sizeof("-worker-9999") - 1);

struct HorovodJobSpec {
  // min_replicas and max_replicas follow replicas when the manifest leaves
  // them out: a job without them is not elastic, as a job with a fixed
  // worker count is in mpi-operator and PyTorchJob.
  int32_t replicas = 1;
  // The controller that reconciles the job: unset or "khorovod.dev/operator"
  // for this operator; any other value (e.g. Kueue's MultiKueue) leaves the
  // job alone. Immutable (CEL in the CRD).
  std::string managed_by;
  int32_t min_replicas = 1;
  int32_t max_replicas = 1;
  // One training process per slot. Left out, it is the worker container's
  // nvidia.com/gpu limit (one process per GPU), else 1.
  int32_t slots_per_worker = 1;
  bool slots_per_worker_set = false;
  LocalRanks local_ranks = LocalRanks::kPod;
  // The first worker container's nvidia.com/gpu limit (0: a CPU job); set
  // by DecodeHorovodJob.
  int32_t gpus_per_worker = 0;
  Json worker_template;  // core/v1 PodTemplateSpec
  RendezvousSpec rendezvous;
  RunPolicy run_policy;
  SchedulingPolicy scheduling;
};

struct Condition {
  std::string type;    // one of condition::k* (api/phase.h)
  std::string status;  // "True" | "False"
  std::string reason;
  std::string message;
  std::string last_transition_time;
};

// A node the job keeps its workers off after a GPU failure there, until
// `until` (RFC 3339). Like Horovod's host blacklist with a cooldown.
struct AvoidedNode {
  std::string node;
  std::string until;
  std::string reason;
};

struct HorovodJobStatus {
  JobPhase phase = JobPhase::kNone;
  std::vector<Condition> conditions;
  int32_t replicas = 0;
  int32_t ready_replicas = 0;
  int32_t active = 0;
  int32_t failed = 0;
  int32_t succeeded = 0;
  int32_t restart_count = 0;
  std::string selector;
  int64_t observed_generation = 0;
  std::string start_time;
  std::string completion_time;
  std::optional<int64_t> rendezvous_generation;
  // UIDs of failed worker pods already counted in restart_count whose
  // deletion has not been observed yet. Stored with the count in one status
  // write, so a failure is counted once even if the operator restarts before
  // it deletes the pod.
  std::vector<std::string> counted_failures;
  // GPU jobs only: GPUs held by the job's scheduled live workers, and GPUs
  // its desired worker count asks for.
  int32_t gpus = 0;
  int32_t gpus_wanted = 0;
  std::vector<AvoidedNode> avoided_nodes;
};

struct HorovodJob {
  std::string name;
  std::string namespace_;
  std::string uid;
  std::string resource_version;
  int64_t generation = 0;
  std::string creation_timestamp;
  bool deleting = false;
  // metadata.labels["kueue.x-k8s.io/queue-name"]: Kueue admits the job first.
  std::string queue_name;
  HorovodJobSpec spec;
  HorovodJobStatus status;
};

// A field-level problem found while decoding or validating.
struct FieldError {
  std::string field;  // "spec.minReplicas"
  std::string message;
};
std::string JoinErrors(const std::vector<FieldError>& errors);

// Decodes an object from the API server, applying defaults. Type errors are
// appended to `errors` and the field keeps its default.
HorovodJob DecodeHorovodJob(const Json& object, std::vector<FieldError>& errors);
// The status subresource body.
Json EncodeStatus(const HorovodJobStatus& status);
HorovodJobStatus DecodeStatus(const Json& status);

// Applies the documented defaults to a decoded spec (called by DecodeHorovodJob).
void ApplyDefaults(HorovodJobSpec& spec);
// Semantic validation the schema cannot express; empty when valid.
std::vector<FieldError> Validate(const HorovodJobSpec& spec);
// The job name: a DNS-1035 label of at most kMaxJobNameLength characters,
// because it prefixes the job's Service names and pod hostnames.
std::vector<FieldError> ValidateName(const std::string& name);
// Both of the above.
std::vector<FieldError> Validate(const HorovodJob& job);

const char* ToString(CleanPodPolicy p);
const char* ToString(RestartPolicy p);
const char* ToString(Placement p);

// The placement a job gets: spec.schedulingPolicy.placement, else Pack for a
// GPU job and Spread for a CPU job.
Placement EffectivePlacement(const HorovodJobSpec& spec);
// The nvidia.com/gpu limit (or, without one, request) of a pod template's
// first container: 0 when it has none, -1 when it is not a whole number.
int32_t TemplateGpus(const Json& pod_template);

}  // namespace khorovod::op
