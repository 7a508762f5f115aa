// Semantic validation of a HorovodJob spec. The CRD's schema and CEL rules
// reject most mistakes at admission; this catches the rest and objects that
// bypassed them (stored before the rules existed), so the operator marks the
// job Failed with reason InvalidSpec instead of crash-looping on it.
#include <set>

#include "api/horovodjob.h"

namespace khorovod::op {

std::vector<FieldError> Validate(const HorovodJobSpec& spec) {
  std::vector<FieldError> errors;
  if (spec.min_replicas < 1) errors.push_back({"spec.minReplicas", "must be at least 1"});
  if (spec.max_replicas < spec.min_replicas)
    errors.push_back({"spec.maxReplicas",
                      "must be at least minReplicas (" + std::to_string(spec.min_replicas) + ")"});
  if (spec.replicas < spec.min_replicas || spec.replicas > spec.max_replicas)
    errors.push_back({"spec.replicas", "must lie in [minReplicas, maxReplicas] = [" +
                                           std::to_string(spec.min_replicas) + ", " +
                                           std::to_string(spec.max_replicas) + "]"});
  if (spec.max_replicas > 10000) errors.push_back({"spec.maxReplicas", "must be at most 10000"});
  if (spec.slots_per_worker < 1 || spec.slots_per_worker > 64)
    errors.push_back({"spec.slotsPerWorker", "must be between 1 and 64"});
  const int32_t gpus = TemplateGpus(spec.worker_template);
  if (gpus < 0)
    errors.push_back({"spec.worker.template.spec.containers[0].resources.limits[nvidia.com/gpu]",
                      "must be a whole number of GPUs"});
  if (gpus > 0 && spec.slots_per_worker_set && spec.slots_per_worker != gpus)
    errors.push_back({"spec.slotsPerWorker", std::to_string(spec.slots_per_worker) +
                                                 " contradicts the nvidia.com/gpu limit " +
                                                 std::to_string(gpus) +
                                                 " of the first worker container: one training "
                                                 "process runs per GPU; leave slotsPerWorker out "
                                                 "or make the two equal"});
  if (spec.scheduling.node_cooldown_seconds < 0)
    errors.push_back({"spec.schedulingPolicy.nodeCooldownSeconds", "must not be negative"});
  if (spec.rendezvous.port < 1 || spec.rendezvous.port > 65535)
    errors.push_back({"spec.rendezvous.port", "must be between 1 and 65535"});
  if (spec.rendezvous.settle_ms < 0)
    errors.push_back({"spec.rendezvous.settleMs", "must not be negative"});
  if (spec.rendezvous.heartbeat_timeout_ms < 100)
    errors.push_back({"spec.rendezvous.heartbeatTimeoutMs", "must be at least 100"});
  if (spec.rendezvous.elastic_timeout_ms < 1000)
    errors.push_back({"spec.rendezvous.elasticTimeoutMs", "must be at least 1000"});
  if (spec.run_policy.backoff_limit < 0)
    errors.push_back({"spec.runPolicy.backoffLimit", "must not be negative"});
  if (spec.run_policy.node_loss_timeout_seconds < 0)
    errors.push_back({"spec.runPolicy.nodeLossTimeoutSeconds", "must not be negative"});
  if (spec.run_policy.active_deadline_seconds && *spec.run_policy.active_deadline_seconds < 1)
    errors.push_back({"spec.runPolicy.activeDeadlineSeconds", "must be at least 1"});
  if (spec.run_policy.ttl_seconds_after_finished && *spec.run_policy.ttl_seconds_after_finished < 0)
    errors.push_back({"spec.runPolicy.ttlSecondsAfterFinished", "must not be negative"});
  if (spec.scheduling.min_available &&
      (*spec.scheduling.min_available < 1 || *spec.scheduling.min_available > spec.max_replicas))
    errors.push_back({"spec.schedulingPolicy.minAvailable", "must lie in [1, maxReplicas]"});

  const Json& tmpl = spec.worker_template;
  const Json* containers = nullptr;
  if (tmpl.is_object() && tmpl.contains("spec") && tmpl["spec"].is_object() &&
      tmpl["spec"].contains("containers"))
    containers = &tmpl["spec"]["containers"];
  if (!containers || !containers->is_array() || containers->empty()) {
    errors.push_back({"spec.worker.template.spec.containers", "must list at least one container"});
  } else {
    std::set<std::string> names;
    for (size_t i = 0; i < containers->size(); ++i) {
      const Json& c = (*containers)[i];
      const std::string field = "spec.worker.template.spec.containers[" + std::to_string(i) + "]";
      if (!c.is_object()) {
        errors.push_back({field, "must be an object"});
        continue;
      }
      std::string name = c.value("name", "");
      if (name.empty())
        errors.push_back({field + ".name", "is required"});
      else if (!names.insert(name).second)
        errors.push_back({field + ".name", "duplicates '" + name + "'"});
      if (c.value("image", "").empty()) errors.push_back({field + ".image", "is required"});
    }
  }
  if (spec.rendezvous.image.empty())
    errors.push_back(
        {"spec.rendezvous.image", "is required when the first worker container has no image"});
  return errors;
}

std::vector<FieldError> ValidateName(const std::string& name) {
  std::vector<FieldError> errors;
  if (name.size() > kMaxJobNameLength)
    errors.push_back(
        {"metadata.name", "must be at most " + std::to_string(kMaxJobNameLength) +
                              " characters: worker pods are named <name>-worker-<index> and pod "
                              "hostnames are limited to 63"});
  bool label = !name.empty() && name[0] >= 'a' && name[0] <= 'z' && name.back() != '-';
  for (char c : name)
    label = label && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
  if (!label)
    errors.push_back({"metadata.name",
                      "must consist of lowercase letters, digits and '-', start with a letter and "
                      "end with a letter or digit: it names the job's Services"});
  return errors;
}

std::vector<FieldError> Validate(const HorovodJob& job) {
  std::vector<FieldError> errors = ValidateName(job.name);
  for (auto& e : Validate(job.spec)) errors.push_back(std::move(e));
  return errors;
}

}  // namespace khorovod::op
