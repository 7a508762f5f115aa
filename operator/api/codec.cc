// Decoding HorovodJob objects from JSON and encoding their status.
#include <sstream>

#include "api/horovodjob.h"

namespace khorovod::op {
namespace {

// Reads an optional field of type T; a present field of the wrong type is an error.
template <typename T>
void Read(const Json& parent, const char* key, const std::string& path, T& out,
          std::vector<FieldError>& errors) {
  if (!parent.is_object()) return;
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return;
  try {
    out = it->get<T>();
  } catch (const std::exception&) {
    errors.push_back({path + "." + key, "has the wrong type"});
  }
}

template <typename T>
void ReadOptional(const Json& parent, const char* key, const std::string& path,
                  std::optional<T>& out, std::vector<FieldError>& errors) {
  if (!parent.is_object() || !parent.contains(key) || parent[key].is_null()) return;
  T value{};
  Read(parent, key, path, value, errors);
  out = value;
}

const Json& Child(const Json& parent, const char* key) {
  static const Json kEmpty = Json::object();
  if (!parent.is_object()) return kEmpty;
  auto it = parent.find(key);
  return it != parent.end() && it->is_object() ? *it : kEmpty;
}

}  // namespace

std::string JoinErrors(const std::vector<FieldError>& errors) {
  std::ostringstream ss;
  for (size_t i = 0; i < errors.size(); ++i) {
    if (i) ss << "; ";
    ss << errors[i].field << ": " << errors[i].message;
  }
  return ss.str();
}

const char* ToString(CleanPodPolicy p) {
  switch (p) {
    case CleanPodPolicy::kRunning:
      return "Running";
    case CleanPodPolicy::kAll:
      return "All";
    case CleanPodPolicy::kNone:
      return "None";
  }
  return "?";
}

const char* ToString(Placement p) {
  switch (p) {
    case Placement::kNone:
      return "None";
    case Placement::kPack:
      return "Pack";
    case Placement::kSpread:
      return "Spread";
  }
  return "?";
}

const char* ToString(RestartPolicy p) {
  switch (p) {
    case RestartPolicy::kOnFailure:
      return "OnFailure";
    case RestartPolicy::kNever:
      return "Never";
    case RestartPolicy::kExitCode:
      return "ExitCode";
  }
  return "?";
}

HorovodJob DecodeHorovodJob(const Json& object, std::vector<FieldError>& errors) {
  HorovodJob job;
  const Json& meta = Child(object, "metadata");
  job.name = meta.value("name", "");
  job.namespace_ = meta.value("namespace", "");
  job.uid = meta.value("uid", "");
  job.resource_version = meta.value("resourceVersion", "");
  job.generation = meta.value("generation", int64_t{0});
  job.creation_timestamp = meta.value("creationTimestamp", "");
  job.deleting = meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null();
  const Json& labels = Child(meta, "labels");
  Read(labels, "kueue.x-k8s.io/queue-name", "metadata.labels", job.queue_name, errors);

  const Json& spec = Child(object, "spec");
  HorovodJobSpec& s = job.spec;
  bool replicas_set = spec.contains("replicas");
  Read(spec, "replicas", "spec", s.replicas, errors);
  Read(spec, "managedBy", "spec", s.managed_by, errors);
  bool min_set = spec.contains("minReplicas"), max_set = spec.contains("maxReplicas");
  Read(spec, "minReplicas", "spec", s.min_replicas, errors);
  Read(spec, "maxReplicas", "spec", s.max_replicas, errors);
  // Unset bounds follow replicas: a job without min/max is not elastic.
  if (replicas_set && !min_set) s.min_replicas = s.replicas;
  if (replicas_set && !max_set) s.max_replicas = s.replicas;
  s.slots_per_worker_set = spec.contains("slotsPerWorker") && !spec["slotsPerWorker"].is_null();
  Read(spec, "slotsPerWorker", "spec", s.slots_per_worker, errors);
  std::optional<std::string> local_ranks;
  ReadOptional(spec, "localRanks", "spec", local_ranks, errors);
  if (local_ranks == "Node")
    s.local_ranks = LocalRanks::kNode;
  else if (local_ranks && *local_ranks != "Pod")
    errors.push_back({"spec.localRanks", "must be Pod or Node, not '" + *local_ranks + "'"});
  const Json& worker = Child(spec, "worker");
  s.worker_template = worker.contains("template") ? worker["template"] : Json::object();

  const Json& rdv = Child(spec, "rendezvous");
  Read(rdv, "port", "spec.rendezvous", s.rendezvous.port, errors);
  Read(rdv, "image", "spec.rendezvous", s.rendezvous.image, errors);
  Read(rdv, "settleMs", "spec.rendezvous", s.rendezvous.settle_ms, errors);
  Read(rdv, "heartbeatTimeoutMs", "spec.rendezvous", s.rendezvous.heartbeat_timeout_ms, errors);
  Read(rdv, "elasticTimeoutMs", "spec.rendezvous", s.rendezvous.elastic_timeout_ms, errors);
  Read(rdv, "resetLimit", "spec.rendezvous", s.rendezvous.reset_limit, errors);

  const Json& run = Child(spec, "runPolicy");
  std::string clean = "Running", restart = "OnFailure";
  Read(run, "cleanPodPolicy", "spec.runPolicy", clean, errors);
  Read(run, "restartPolicy", "spec.runPolicy", restart, errors);
  if (clean == "Running")
    s.run_policy.clean_pod_policy = CleanPodPolicy::kRunning;
  else if (clean == "All")
    s.run_policy.clean_pod_policy = CleanPodPolicy::kAll;
  else if (clean == "None")
    s.run_policy.clean_pod_policy = CleanPodPolicy::kNone;
  else
    errors.push_back(
        {"spec.runPolicy.cleanPodPolicy", "must be Running, All or None, not '" + clean + "'"});
  if (restart == "OnFailure")
    s.run_policy.restart_policy = RestartPolicy::kOnFailure;
  else if (restart == "Never")
    s.run_policy.restart_policy = RestartPolicy::kNever;
  else if (restart == "ExitCode")
    s.run_policy.restart_policy = RestartPolicy::kExitCode;
  else
    errors.push_back({"spec.runPolicy.restartPolicy",
                      "must be OnFailure, Never or ExitCode, not '" + restart + "'"});
  ReadOptional(run, "ttlSecondsAfterFinished", "spec.runPolicy",
               s.run_policy.ttl_seconds_after_finished, errors);
  ReadOptional(run, "activeDeadlineSeconds", "spec.runPolicy", s.run_policy.active_deadline_seconds,
               errors);
  Read(run, "backoffLimit", "spec.runPolicy", s.run_policy.backoff_limit, errors);
  Read(run, "suspend", "spec.runPolicy", s.run_policy.suspend, errors);
  Read(run, "nodeLossTimeoutSeconds", "spec.runPolicy", s.run_policy.node_loss_timeout_seconds,
       errors);

  const Json& sched = Child(spec, "schedulingPolicy");
  Read(sched, "schedulerName", "spec.schedulingPolicy", s.scheduling.scheduler_name, errors);
  Read(sched, "priorityClassName", "spec.schedulingPolicy", s.scheduling.priority_class_name,
       errors);
  Read(sched, "gang", "spec.schedulingPolicy", s.scheduling.gang, errors);
  ReadOptional(sched, "minAvailable", "spec.schedulingPolicy", s.scheduling.min_available, errors);
  std::optional<std::string> placement;
  ReadOptional(sched, "placement", "spec.schedulingPolicy", placement, errors);
  if (placement == "Pack")
    s.scheduling.placement = Placement::kPack;
  else if (placement == "Spread")
    s.scheduling.placement = Placement::kSpread;
  else if (placement == "None")
    s.scheduling.placement = Placement::kNone;
  else if (placement)
    errors.push_back({"spec.schedulingPolicy.placement",
                      "must be Pack, Spread or None, not '" + *placement + "'"});
  Read(sched, "nodeCooldownSeconds", "spec.schedulingPolicy", s.scheduling.node_cooldown_seconds,
       errors);

  ApplyDefaults(s);
  job.status = DecodeStatus(Child(object, "status"));
  return job;
}

HorovodJobStatus DecodeStatus(const Json& st) {
  HorovodJobStatus s;
  std::vector<FieldError> ignored;  // status is ours; tolerate anything
  std::string phase;
  Read(st, "phase", "status", phase, ignored);
  s.phase = ParseJobPhase(phase).value_or(JobPhase::kNone);
  Read(st, "replicas", "status", s.replicas, ignored);
  Read(st, "readyReplicas", "status", s.ready_replicas, ignored);
  Read(st, "active", "status", s.active, ignored);
  Read(st, "failed", "status", s.failed, ignored);
  Read(st, "succeeded", "status", s.succeeded, ignored);
  Read(st, "restartCount", "status", s.restart_count, ignored);
  Read(st, "selector", "status", s.selector, ignored);
  Read(st, "observedGeneration", "status", s.observed_generation, ignored);
  Read(st, "startTime", "status", s.start_time, ignored);
  Read(st, "completionTime", "status", s.completion_time, ignored);
  ReadOptional(st, "rendezvousGeneration", "status", s.rendezvous_generation, ignored);
  Read(st, "countedFailures", "status", s.counted_failures, ignored);
  Read(st, "gpus", "status", s.gpus, ignored);
  Read(st, "gpusWanted", "status", s.gpus_wanted, ignored);
  if (st.is_object() && st.contains("avoidedNodes") && st["avoidedNodes"].is_array()) {
    for (const auto& n : st["avoidedNodes"])
      if (n.is_object())
        s.avoided_nodes.push_back(
            {n.value("node", ""), n.value("until", ""), n.value("reason", "")});
  }
  if (st.is_object() && st.contains("conditions") && st["conditions"].is_array()) {
    for (const auto& c : st["conditions"]) {
      if (!c.is_object()) continue;
      s.conditions.push_back({c.value("type", ""), c.value("status", ""), c.value("reason", ""),
                              c.value("message", ""), c.value("lastTransitionTime", "")});
    }
  }
  return s;
}

Json EncodeStatus(const HorovodJobStatus& s) {
  Json conditions = Json::array();
  for (const auto& c : s.conditions) {
    conditions.push_back({{"type", c.type},
                          {"status", c.status},
                          {"reason", c.reason},
                          {"message", c.message},
                          {"lastTransitionTime", c.last_transition_time}});
  }
  Json out = {{"phase", ToString(s.phase)}, {"conditions", conditions},
              {"replicas", s.replicas},     {"readyReplicas", s.ready_replicas},
              {"active", s.active},         {"failed", s.failed},
              {"succeeded", s.succeeded},   {"restartCount", s.restart_count},
              {"selector", s.selector},     {"observedGeneration", s.observed_generation}};
  if (!s.start_time.empty()) out["startTime"] = s.start_time;
  if (!s.completion_time.empty()) out["completionTime"] = s.completion_time;
  if (s.rendezvous_generation) out["rendezvousGeneration"] = *s.rendezvous_generation;
  if (!s.counted_failures.empty()) out["countedFailures"] = s.counted_failures;
  if (s.gpus_wanted > 0 || s.gpus > 0) {
    out["gpus"] = s.gpus;
    out["gpusWanted"] = s.gpus_wanted;
  }
  if (!s.avoided_nodes.empty()) {
    Json nodes = Json::array();
    for (const auto& n : s.avoided_nodes)
      nodes.push_back({{"node", n.node}, {"until", n.until}, {"reason", n.reason}});
    out["avoidedNodes"] = nodes;
  }
  return out;
}

}  // namespace khorovod::op
