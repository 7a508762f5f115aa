#include "controller/kueue_workload.h"

#include <algorithm>

#include "controller/builders.h"

namespace khorovod::op {
namespace {

// Points into `workload` (never into a copy: value() would return one).
const Json* FindCondition(const Json& workload, const char* type) {
  auto status = workload.find("status");
  if (status == workload.end() || !status->is_object()) return nullptr;
  auto it = status->find("conditions");
  if (it == status->end() || !it->is_array()) return nullptr;
  for (const auto& c : *it)
    if (c.is_object() && c.value("type", "") == type) return &c;
  return nullptr;
}

bool ConditionTrue(const Json& workload, const char* type) {
  const Json* c = FindCondition(workload, type);
  return c && c->value("status", "") == "True";
}

// Sets a condition, moving lastTransitionTime only when the status flips.
void SetWorkloadCondition(Json& workload, const char* type, bool value, const std::string& reason,
                          const std::string& message, const std::string& now) {
  Json& conditions = workload["status"]["conditions"];
  if (!conditions.is_array()) conditions = Json::array();
  const std::string status = value ? "True" : "False";
  for (auto& c : conditions) {
    if (c.value("type", "") != type) continue;
    if (c.value("status", "") != status) c["lastTransitionTime"] = now;
    c["status"] = status;
    c["reason"] = reason;
    c["message"] = message;
    c["observedGeneration"] = workload["metadata"].value("generation", 0);
    return;
  }
  conditions.push_back({{"type", type},
                        {"status", status},
                        {"reason", reason},
                        {"message", message},
                        {"lastTransitionTime", now},
                        {"observedGeneration", workload["metadata"].value("generation", 0)}});
}

std::vector<std::string> FlavorNames(const Json& assignment) {
  std::vector<std::string> names;
  const Json flavors = assignment.value("flavors", Json::object());
  for (const auto& [resource, flavor] : flavors.items()) {
    if (flavor.is_string() && std::find(names.begin(), names.end(), flavor) == names.end())
      names.push_back(flavor.get<std::string>());
  }
  return names;
}

Json PodSet(const char* name, const Json& pod_spec, int32_t count,
            std::optional<int32_t> min_count) {
  Json set = {{"name", name}, {"count", count}, {"template", {{"spec", pod_spec}}}};
  if (min_count) set["minCount"] = *min_count;
  return set;
}

}  // namespace

bool ManagedElsewhere(const HorovodJob& job) {
  return !job.spec.managed_by.empty() && job.spec.managed_by != kManagedByKhorovod;
}

bool QueuedByKueue(const HorovodJob& job) {
  return !job.queue_name.empty() && !ManagedElsewhere(job);
}

std::string WorkloadName(const HorovodJob& job) { return "horovodjob-" + job.name; }

Json BuildWorkload(const HorovodJob& job) {
  Json metadata = {{"name", WorkloadName(job)},
                   {"namespace", job.namespace_},
                   {"labels", {{kLabelJobName, job.name}, {"kueue.x-k8s.io/job-uid", job.uid}}},
                   {"ownerReferences", Json::array({OwnerReference(job)})}};
  Json worker_spec = job.spec.worker_template.value("spec", Json::object());
  const bool elastic = job.spec.min_replicas < job.spec.max_replicas;
  Json pod_sets =
      Json::array({PodSet("worker", worker_spec, job.spec.max_replicas,
                          elastic ? std::optional<int32_t>(job.spec.min_replicas) : std::nullopt),
                   PodSet("rendezvous", BuildRendezvousPod(job).value("spec", Json::object()), 1,
                          std::nullopt)});
  Json spec = {{"queueName", job.queue_name}, {"podSets", pod_sets}, {"active", true}};
  return {{"apiVersion", kWorkloads.group_version},
          {"kind", "Workload"},
          {"metadata", metadata},
          {"spec", spec}};
}

WorkloadAdmission ReadAdmission(const Json& workload, int32_t max_workers) {
  WorkloadAdmission a;
  const Json& status = workload.value("status", Json::object());
  const Json& admission = status.value("admission", Json());
  a.quota_reserved = admission.is_object() && ConditionTrue(workload, "QuotaReserved");
  a.evicted = ConditionTrue(workload, "Evicted");
  a.finished = ConditionTrue(workload, "Finished");
  a.admitted = a.quota_reserved && ConditionTrue(workload, "Admitted") && !a.evicted && !a.finished;
  if (a.quota_reserved) {
    for (const auto& set : admission.value("podSetAssignments", Json::array())) {
      if (!set.is_object()) continue;
      const std::string name = set.value("name", "");
      if (name == "worker") {
        a.workers = set.contains("count") && set["count"].is_number_integer()
                        ? set["count"].get<int32_t>()
                        : max_workers;
        a.worker_flavors = FlavorNames(set);
      } else if (name == "rendezvous") {
        a.rendezvous_flavors = FlavorNames(set);
      }
    }
  }
  if (a.evicted) {
    a.message = "evicted by Kueue: " + FindCondition(workload, "Evicted")->value("message", "");
  } else if (!a.admitted) {
    const Json* q = FindCondition(workload, "QuotaReserved");
    a.message = "waiting for Kueue to admit workload " + workload["metadata"].value("name", "") +
                (q && !q->value("message", "").empty() ? ": " + q->value("message", "") : "");
  }
  return a;
}

Json WorkloadWithoutQuota(const Json& workload, const std::string& now,
                          const std::string& message) {
  Json out = workload;
  out["status"].erase("admission");
  SetWorkloadCondition(out, "QuotaReserved", false, "Pending", message, now);
  if (FindCondition(out, "Admitted"))
    SetWorkloadCondition(out, "Admitted", false, "NoReservation", message, now);
  return out;
}

Json WorkloadFinished(const Json& workload, bool succeeded, const std::string& now,
                      const std::string& message) {
  Json out = workload;
  SetWorkloadCondition(out, "Finished", true, succeeded ? "Succeeded" : "Failed", message, now);
  return out;
}

void ApplyFlavors(Json& pod_spec, const std::vector<Json>& flavors) {
  for (const auto& flavor : flavors) {
    const Json& fspec = flavor.value("spec", Json::object());
    const Json labels = fspec.value("nodeLabels", Json::object());
    for (const auto& [key, value] : labels.items()) pod_spec["nodeSelector"][key] = value;
    for (const auto& toleration : fspec.value("tolerations", Json::array())) {
      Json& list = pod_spec["tolerations"];
      if (!list.is_array()) list = Json::array();
      if (std::find(list.begin(), list.end(), toleration) == list.end()) list.push_back(toleration);
    }
  }
}

}  // namespace khorovod::op
