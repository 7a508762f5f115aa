#include "controller/builders.h"

namespace khorovod::op {
namespace {

constexpr const char* kTokenKey = "token";

Json Labels(const HorovodJob& job, const char* role) {
  return {{kLabelJobName, job.name}, {kLabelRole, role}};
}

Json Metadata(const HorovodJob& job, const std::string& name, const char* role) {
  return {{"name", name},
          {"namespace", job.namespace_},
          {"labels", Labels(job, role)},
          {"ownerReferences", Json::array({OwnerReference(job)})}};
}

Json RestrictedSecurityContext() {
  return {{"runAsNonRoot", true},
          {"allowPrivilegeEscalation", false},
          {"readOnlyRootFilesystem", true},
          {"capabilities", {{"drop", Json::array({"ALL"})}}}};
}

Json TokenEnv(const HorovodJob& job) {
  return {{"name", "KHOROVOD_RENDEZVOUS_TOKEN"},
          {"valueFrom", {{"secretKeyRef", {{"name", TokenSecretName(job)}, {"key", kTokenKey}}}}}};
}

Json FieldEnv(const char* name, const char* field_path) {
  return {{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", field_path}}}}}};
}

// Sets or replaces `name` in a container's env list; the operator's values win
// because the runtime's wiring depends on them.
void SetEnv(Json& container, const Json& var) {
  Json& env = container["env"];
  if (!env.is_array()) env = Json::array();
  for (auto& e : env) {
    if (e.value("name", "") == var["name"]) {
      e = var;
      return;
    }
  }
  env.push_back(var);
}

// Sets `name` only when the user's template did not.
void SetEnvDefault(Json& container, const Json& var) {
  Json& env = container["env"];
  if (!env.is_array()) env = Json::array();
  for (const auto& e : env)
    if (e.value("name", "") == var["name"]) return;
  env.push_back(var);
}

// Declares the named metrics port (for PodMonitors) unless one exists.
void AddMetricsPort(Json& container, int port) {
  Json& ports = container["ports"];
  if (!ports.is_array()) ports = Json::array();
  for (const auto& p : ports)
    if (p.value("name", "") == "metrics") return;
  ports.push_back({{"name", "metrics"}, {"containerPort", port}});
}

// Slots of one pod exchange data through POSIX shared memory, and the
// container runtime's default /dev/shm is 64 MiB: too small for fused
// gradients. A memory-backed emptyDir replaces it, unless the user's
// template already mounts something there (their choice wins).
void MountSharedMemory(Json& spec) {
  auto mounts_dev_shm = [](const Json& container) {
    if (!container.contains("volumeMounts") || !container["volumeMounts"].is_array()) return false;
    for (const auto& m : container["volumeMounts"])
      if (m.value("mountPath", "") == "/dev/shm") return true;
    return false;
  };
  if (!spec.contains("containers") || !spec["containers"].is_array()) return;
  Json& volumes = spec["volumes"];
  if (!volumes.is_array()) volumes = Json::array();
  bool declared = false;
  for (const auto& v : volumes) declared = declared || v.value("name", "") == kSharedMemoryVolume;
  if (!declared)
    volumes.push_back({{"name", kSharedMemoryVolume}, {"emptyDir", {{"medium", "Memory"}}}});
  for (auto& container : spec["containers"]) {
    if (mounts_dev_shm(container)) continue;
    Json& mounts = container["volumeMounts"];
    if (!mounts.is_array()) mounts = Json::array();
    mounts.push_back({{"name", kSharedMemoryVolume}, {"mountPath", "/dev/shm"}});
  }
}

// GPU nodes are commonly tainted nvidia.com/gpu:NoSchedule so that only pods
// that want GPUs land there; a GPU job's pods tolerate it unless the
// template already says something about that taint.
void TolerateGpuTaint(Json& spec) {
  Json& tolerations = spec["tolerations"];
  if (!tolerations.is_array()) tolerations = Json::array();
  for (const auto& t : tolerations)
    if (t.is_object() && t.value("key", "") == kGpuResource) return;
  tolerations.push_back({{"key", kGpuResource}, {"operator", "Exists"}, {"effect", "NoSchedule"}});
}

Json WorkerSelectorTerm(const HorovodJob& job) { return {{"matchLabels", Labels(job, "worker")}}; }

// Pack: prefer nodes that already run this job's workers. Spread: at most one
// worker more per node (and per zone) than elsewhere, as a preference, so a
// job still starts where the nodes are uneven. A template that sets its own
// pod affinity or spread constraints keeps them instead.
void ApplyPlacement(const HorovodJob& job, Json& spec) {
  const Placement placement = EffectivePlacement(job.spec);
  if (placement == Placement::kPack) {
    Json& affinity = spec["affinity"];
    if (!affinity.is_object()) affinity = Json::object();
    if (affinity.contains("podAffinity")) return;
    affinity["podAffinity"] = {{"preferredDuringSchedulingIgnoredDuringExecution",
                                Json::array({{{"weight", 100},
                                              {"podAffinityTerm",
                                               {{"labelSelector", WorkerSelectorTerm(job)},
                                                {"topologyKey", "kubernetes.io/hostname"}}}}})}};
  } else if (placement == Placement::kSpread) {
    if (spec.contains("topologySpreadConstraints")) return;
    Json constraints = Json::array();
    for (const char* key : {"kubernetes.io/hostname", "topology.kubernetes.io/zone"})
      constraints.push_back({{"maxSkew", 1},
                             {"topologyKey", key},
                             {"whenUnsatisfiable", "ScheduleAnyway"},
                             {"labelSelector", WorkerSelectorTerm(job)}});
    spec["topologySpreadConstraints"] = constraints;
  }
}

// Keeps the pod off `nodes`: every term of the required node affinity (the
// terms are alternatives) gains "metadata.name NotIn nodes".
void AvoidNodes(const std::vector<std::string>& nodes, Json& spec) {
  if (nodes.empty()) return;
  Json& affinity = spec["affinity"];
  if (!affinity.is_object()) affinity = Json::object();
  Json& required = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
  if (!required.is_object()) required = Json::object();
  Json& terms = required["nodeSelectorTerms"];
  if (!terms.is_array() || terms.empty()) terms = Json::array({Json::object()});
  const Json requirement = {{"key", "metadata.name"}, {"operator", "NotIn"}, {"values", nodes}};
  for (auto& term : terms) {
    Json& fields = term["matchFields"];
    if (!fields.is_array()) fields = Json::array();
    fields.push_back(requirement);
  }
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

}  // namespace

std::string WorkerPodName(const HorovodJob& job, int index) {
  return job.name + "-worker-" + std::to_string(index);
}
std::string WorkersServiceName(const HorovodJob& job) { return job.name + "-worker"; }
std::string RendezvousName(const HorovodJob& job) { return job.name + "-rendezvous"; }
std::string TokenSecretName(const HorovodJob& job) { return job.name + "-token"; }
std::string WorkerSelector(const HorovodJob& job) {
  return std::string(kLabelJobName) + "=" + job.name + "," + kLabelRole + "=worker";
}
std::string RendezvousAddress(const HorovodJob& job) {
  return RendezvousName(job) + "." + job.namespace_ +
         ".svc:" + std::to_string(job.spec.rendezvous.port);
}

Json OwnerReference(const HorovodJob& job) {
  return {{"apiVersion", kApiVersion}, {"kind", kKind},
          {"name", job.name},          {"uid", job.uid},
          {"controller", true},        {"blockOwnerDeletion", true}};
}

Json BuildTokenSecret(const HorovodJob& job, const std::string& token) {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", Metadata(job, TokenSecretName(job), "rendezvous")},
          {"type", "Opaque"},
          {"stringData", {{kTokenKey, token}}}};
}

Json BuildRendezvousService(const HorovodJob& job) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", Metadata(job, RendezvousName(job), "rendezvous")},
          {"spec",
           {{"selector", Labels(job, "rendezvous")},
            {"ports", Json::array({{{"name", "rendezvous"},
                                    {"port", job.spec.rendezvous.port},
                                    {"targetPort", job.spec.rendezvous.port}}})}}}};
}

Json BuildRendezvousPod(const HorovodJob& job) {
  const auto& r = job.spec.rendezvous;
  const int slots = job.spec.slots_per_worker;
  Json args = Json::array({"--job",
                           job.name,
                           "--host",
                           "0.0.0.0",
                           "--port",
                           std::to_string(r.port),
                           "--min-workers",
                           std::to_string(job.spec.min_replicas * slots),
                           "--max-workers",
                           std::to_string(job.spec.max_replicas * slots),
                           "--settle-ms",
                           std::to_string(r.settle_ms),
                           "--heartbeat-timeout-ms",
                           std::to_string(r.heartbeat_timeout_ms),
                           "--elastic-timeout-ms",
                           std::to_string(r.elastic_timeout_ms),
                           "--reset-limit",
                           std::to_string(r.reset_limit),
                           "--metrics-port",
                           std::to_string(kRendezvousMetricsPort)});
  Json container = {
      {"name", "rendezvous"},
      {"image", r.image},
      {"command", Json::array({"khorovod-rendezvous"})},
      {"args", args},
      {"env", Json::array({TokenEnv(job)})},
      {"ports", Json::array({{{"name", "rendezvous"}, {"containerPort", r.port}},
                             {{"name", "metrics"}, {"containerPort", kRendezvousMetricsPort}}})},
      {"readinessProbe",
       {{"httpGet", {{"path", "/healthz"}, {"port", r.port}}}, {"periodSeconds", 2}}},
      {"resources", {{"requests", {{"cpu", "100m"}, {"memory", "64Mi"}}}}},
      {"securityContext", RestrictedSecurityContext()}};
  Json spec = {{"restartPolicy", "Always"},
               {"containers", Json::array({container})},
               {"securityContext",
                {{"runAsNonRoot", true},
                 {"runAsUser", 65532},
                 {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
               {"automountServiceAccountToken", false}};
  if (!job.spec.scheduling.priority_class_name.empty())
    spec["priorityClassName"] = job.spec.scheduling.priority_class_name;
  if (!job.spec.scheduling.scheduler_name.empty())
    spec["schedulerName"] = job.spec.scheduling.scheduler_name;
  // The rendezvous runs the workers' image where the workers may run: it
  // inherits their pull secrets, node selector and tolerations.
  const Json worker_spec = job.spec.worker_template.value("spec", Json::object());
  for (const char* field : {"imagePullSecrets", "nodeSelector", "tolerations"})
    if (worker_spec.is_object() && worker_spec.contains(field)) spec[field] = worker_spec[field];
  // ... and the GPU nodes a GPU job's template selects may be tainted.
  if (job.spec.gpus_per_worker > 0) TolerateGpuTaint(spec);
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", Metadata(job, RendezvousName(job), "rendezvous")},
          {"spec", spec}};
}

Json BuildWorkersService(const HorovodJob& job) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", Metadata(job, WorkersServiceName(job), "worker")},
          {"spec",
           {{"clusterIP", "None"},
            {"publishNotReadyAddresses", true},
            {"selector", Labels(job, "worker")}}}};
}

Json BuildWorkerPod(const HorovodJob& job, int index, const std::vector<std::string>& avoid_nodes) {
  const Json& tmpl = job.spec.worker_template;
  Json meta = tmpl.value("metadata", Json::object());
  if (!meta.is_object()) meta = Json::object();
  Json labels = meta.value("labels", Json::object());
  labels[kLabelJobName] = job.name;
  labels[kLabelRole] = "worker";
  labels[kLabelWorkerIndex] = std::to_string(index);
  Json metadata = {{"name", WorkerPodName(job, index)},
                   {"namespace", job.namespace_},
                   {"labels", labels},
                   {"ownerReferences", Json::array({OwnerReference(job)})}};
  if (meta.contains("annotations")) metadata["annotations"] = meta["annotations"];
  if (!avoid_nodes.empty())
    metadata["annotations"][kAnnotationAvoidedNodes] = JoinNames(avoid_nodes);

  Json spec = tmpl.value("spec", Json::object());
  spec["hostname"] = WorkerPodName(job, index);
  spec["subdomain"] = WorkersServiceName(job);
  // The operator replaces failed workers itself; the kubelet must not restart
  // them in place, or a crashed rank would rejoin under the same pod silently.
  spec["restartPolicy"] = "Never";
  if (!job.spec.scheduling.scheduler_name.empty())
    spec["schedulerName"] = job.spec.scheduling.scheduler_name;
  if (!job.spec.scheduling.priority_class_name.empty())
    spec["priorityClassName"] = job.spec.scheduling.priority_class_name;
  if (job.spec.scheduling.gang) {
    // scheduler-plugins' coscheduling reads this label.
    metadata["labels"]["scheduling.x-k8s.io/pod-group"] = job.name;
  }
  const Json vars[] = {
      {{"name", "KHOROVOD_RENDEZVOUS_ADDR"}, {"value", RendezvousAddress(job)}},
      TokenEnv(job),
      {{"name", "KHOROVOD_JOB_ID"}, {"value", job.name}},
      FieldEnv("KHOROVOD_WORKER_NAME", "metadata.name"),
      FieldEnv("KHOROVOD_HOSTNAME", "status.podIP"),
      // The node the pod runs on: the rendezvous counts ranks by node with
      // it (spec.localRanks: Node; docs/api.md, "Ranks, pods and nodes").
      FieldEnv("KHOROVOD_NODE_NAME", "spec.nodeName"),
      {{"name", "KHOROVOD_LOCAL_RANKS"},
       {"value", job.spec.local_ranks == LocalRanks::kNode ? "node" : "pod"}},
      {{"name", "KHOROVOD_SLOTS"}, {"value", std::to_string(job.spec.slots_per_worker)}},
      {{"name", "KHOROVOD_WORKER_INDEX"}, {"value", std::to_string(index)}},
      {{"name", "KHOROVOD_MIN_WORKERS"}, {"value", std::to_string(job.spec.min_replicas)}},
      {{"name", "KHOROVOD_MAX_WORKERS"}, {"value", std::to_string(job.spec.max_replicas)}},
      {{"name", "KHOROVOD_GPU_ERROR_EXIT_CODE"}, {"value", std::to_string(kGpuErrorExitCode)}},
  };
  if (spec.contains("containers") && spec["containers"].is_array()) {
    for (auto& container : spec["containers"]) {
      for (const auto& v : vars) SetEnv(container, v);
    }
    // Metrics on by default, on the pod's own address; the user may override.
    Json& trainer = spec["containers"][0];
    SetEnvDefault(trainer, {{"name", "KHOROVOD_METRICS_PORT"},
                            {"value", std::to_string(kWorkerMetricsPort)}});
    SetEnvDefault(trainer, FieldEnv("KHOROVOD_METRICS_HOST", "status.podIP"));
    AddMetricsPort(trainer, kWorkerMetricsPort);
  }
  if (job.spec.slots_per_worker > 1) MountSharedMemory(spec);
  if (job.spec.gpus_per_worker > 0) TolerateGpuTaint(spec);
  ApplyPlacement(job, spec);
  AvoidNodes(avoid_nodes, spec);
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", metadata}, {"spec", spec}};
}

Json BuildPodGroup(const HorovodJob& job) {
  int min_member = job.spec.scheduling.min_available.value_or(job.spec.min_replicas);
  Json metadata = Metadata(job, job.name, "worker");
  return {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
          {"kind", "PodGroup"},
          {"metadata", metadata},
          {"spec", {{"minMember", min_member}}}};
}

Json BuildDisruptionBudget(const HorovodJob& job) {
  return {{"apiVersion", "policy/v1"},
          {"kind", "PodDisruptionBudget"},
          {"metadata", Metadata(job, job.name, "worker")},
          {"spec",
           {{"minAvailable", job.spec.min_replicas},
            {"selector", WorkerSelectorTerm(job)},
            // A worker that is not Ready (Pending, crash-looping) trains
            // nothing: evicting it never costs the job a rank.
            {"unhealthyPodEvictionPolicy", "AlwaysAllow"}}}};
}

int WorkerIndexOf(const Json& pod) {
  const Json& labels = pod.at("metadata").value("labels", Json::object());
  auto it = labels.find(kLabelWorkerIndex);
  if (it == labels.end() || !it->is_string()) return -1;
  try {
    size_t used = 0;
    int v = std::stoi(it->get<std::string>(), &used);
    return used == it->get<std::string>().size() && v >= 0 ? v : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace khorovod::op
