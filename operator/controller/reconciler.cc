#include "controller/reconciler.h"

#include <atomic>

#include "controller/builders.h"
#include "controller/kueue_workload.h"
#include "controller/reconciler_attempt.h"
#include "controller/token.h"

namespace khorovod::op {

Reconciler::Reconciler(kube::RestClient& client, kube::Informer& jobs, kube::Informer& pods,
                       kube::Informer& services, kube::Informer* workloads,
                       kube::EventRecorder& events, RendezvousMonitor* monitor,
                       ReconcilerOptions options, kube::Informer* nodes)
    : client_(client),
      jobs_(jobs),
      pods_(pods),
      services_(services),
      workloads_(workloads),
      nodes_(nodes),
      events_(events),
      monitor_(monitor),
      options_(options),
      writer_(client, options.write_parallelism) {}

std::map<JobPhase, int> Reconciler::PhaseCounts() const {
  std::map<JobPhase, int> counts;
  for (const auto& obj : jobs_.List()) {
    const std::string phase = obj->value("status", Json::object()).value("phase", "");
    JobPhase p = ParseJobPhase(phase).value_or(JobPhase::kNone);
    counts[p == JobPhase::kNone ? JobPhase::kCreated : p]++;
  }
  return counts;
}

GpuTotals Reconciler::Gpus() const {
  GpuTotals totals;
  for (const auto& obj : jobs_.List()) {
    const Json status = obj->value("status", Json::object());
    if (!status.is_object() ||
        IsFinished(ParseJobPhase(status.value("phase", "")).value_or(JobPhase::kNone)))
      continue;
    const Json gpus = status.value("gpus", Json(0)), wanted = status.value("gpusWanted", Json(0));
    if (gpus.is_number_integer()) totals.in_use += gpus.get<int64_t>();
    if (wanted.is_number_integer()) totals.wanted += wanted.get<int64_t>();
  }
  return totals;
}

ReconcileOutcome Reconciler::Reconcile(const std::string& key) {
  Attempt a;
  if (!Load(key, a)) return {};
  Observe(a);
  a.plan = PlanJob(a.input);
  for (Step step :
       {&Reconciler::RecordRestarts, &Reconciler::DeleteExpiredJob, &Reconciler::SyncWorkload,
        &Reconciler::ResolveFlavors, &Reconciler::EnsureRendezvous, &Reconciler::DeletePods,
        &Reconciler::CreateWorkers, &Reconciler::WriteStatus})
    if (std::optional<ReconcileOutcome> outcome = (this->*step)(a)) return *outcome;
  return Finish(a);
}

bool Reconciler::Load(const std::string& key, Attempt& a) {
  const auto slash = key.find('/');
  a.key = key;
  a.ns = key.substr(0, slash);
  a.name = key.substr(slash + 1);
  a.object = expectations_.Freshest(jobs_.Get(a.ns, a.name));
  if (!a.object) {
    if (monitor_) monitor_->Untrack(key);
    expectations_.ForgetKey(key);
    return false;  // deleted: its pods, services and secret are garbage-collected
  }
  a.job = DecodeHorovodJob(*a.object, a.input.spec_errors);
  if (a.job.deleting || ManagedElsewhere(a.job)) return false;
  a.ref = {kApiVersion, kKind, a.job.namespace_, a.job.name, a.job.uid};
  return true;
}

void Reconciler::Observe(Attempt& a) {
  a.input.job = &a.job;
  a.input.now = std::chrono::system_clock::now();
  for (auto& e : Validate(a.job)) a.input.spec_errors.push_back(std::move(e));
  for (const auto& pod : pods_.ByOwner(a.job.uid)) {
    const std::string role =
        pod->at("metadata").value("labels", Json::object()).value(kLabelRole, "");
    if (role == "worker")
      a.input.workers.push_back(*pod);
    else if (role == "rendezvous")
      a.input.rendezvous = *pod;
  }
  std::set<std::string> observed;
  for (const Json& pod : a.input.workers) observed.insert(pod.at("metadata").value("name", ""));
  ObserveNodes(a);
  a.created_unseen = expectations_.Pending(a.job.uid, observed);
  ObserveWorkload(a);
  if (!monitor_) return;
  // The monitor watches a running rendezvous pod of a job that may still train.
  const Json* pod = a.input.rendezvous ? &*a.input.rendezvous : nullptr;
  const Json status = pod ? pod->value("status", Json::object()) : Json::object();
  const bool watch =
      pod && !IsFinished(a.job.status.phase) && status.value("phase", "") == "Running" &&
      !pod->at("metadata").contains("deletionTimestamp") && !status.value("podIP", "").empty();
  if (watch)
    monitor_->Track(a.key, a.job.uid, status.value("podIP", ""), a.job.spec.rendezvous.port);
  else if (!pod || IsFinished(a.job.status.phase))
    monitor_->Untrack(a.key);
  a.input.rendezvous_generation = monitor_->Generation(a.key, a.job.uid);
}

void Reconciler::ObserveNodes(Attempt& a) {
  if (!nodes_) return;
  auto observe = [&](const Json& pod) {
    const std::string node = pod.value("spec", Json::object()).value("nodeName", "");
    if (node.empty() || a.input.nodes.count(node)) return;
    if (kube::ObjectPtr object = nodes_->Get("", node)) a.input.nodes[node] = NodeHealthOf(*object);
  };
  for (const Json& pod : a.input.workers) observe(pod);
  if (a.input.rendezvous) observe(*a.input.rendezvous);
}

ReconcileOutcome Reconciler::Failed(const Attempt& a, const kube::ApiStatus& s,
                                    const std::string& what) {
  const std::string message = what + ": " + s.ToString();
  // The job's namespace is being deleted: nothing can be created there any
  // more, and the job goes with it. Not an error worth an event.
  if (s.code() == kube::ApiCode::kForbidden &&
      s.message().find("is being terminated") != std::string::npos)
    return {};
  if (s.retryable()) return {ReconcileOutcome::kRetry, {}, message};
  events_.Record(a.ref, "Warning", "ReconcileError", message);
  return {ReconcileOutcome::kTerminal, {}, message};
}

kube::ApiStatus Reconciler::PutStatus(Attempt& a) {
  Json updated = *a.object;
  updated["status"] = EncodeStatus(a.plan.status);
  auto r = client_.Put(kHorovodJobs.ObjectPath(a.ns, a.name) + "/status", updated);
  if (!r.ok()) return r.status();
  const std::string replaced = a.object->at("metadata").value("resourceVersion", "");
  a.object = std::make_shared<const Json>(std::move(r).value());
  expectations_.WroteJob(a.job.uid, a.key, replaced, a.object);
  return kube::ApiStatus::Ok();
}

std::optional<ReconcileOutcome> Reconciler::RecordRestarts(Attempt& a) {
  // A failure consumes a restart only once the status saying so (with the
  // pod's UID in countedFailures) is stored: write it before deleting the
  // failed pods, so a lost write (409) or an operator restart is retried
  // against pods that still show the failure and are not counted again.
  if (a.plan.counted_failures.empty()) return std::nullopt;
  kube::ApiStatus s = PutStatus(a);
  if (s.ok()) return std::nullopt;
  if (s.code() == kube::ApiCode::kNotFound) return ReconcileOutcome{};
  return Failed(a, s, "recording the restart count");
}

std::optional<ReconcileOutcome> Reconciler::DeleteExpiredJob(Attempt& a) {
  if (!a.plan.delete_job) return std::nullopt;
  Json options = {{"apiVersion", "v1"},
                  {"kind", "DeleteOptions"},
                  {"propagationPolicy", "Background"},
                  {"preconditions", {{"uid", a.job.uid}}}};
  auto r = client_.Delete(kHorovodJobs.ObjectPath(a.ns, a.name), options);
  if (!r.ok() && r.status().code() != kube::ApiCode::kNotFound)
    return Failed(a, r.status(), "deleting the finished job");
  return ReconcileOutcome{};
}

std::optional<ReconcileOutcome> Reconciler::EnsureTokenSecret(Attempt& a) {
  {
    MutexLock lock(mu_);
    if (secret_ensured_.count(a.job.uid)) return std::nullopt;
  }
  std::optional<std::string> token = NewToken();
  if (!token)
    return ReconcileOutcome{
        ReconcileOutcome::kRetry, {}, "no random bytes for the rendezvous token"};
  if (auto s = writer_.EnsureCreated(kube::kSecrets, a.ns, BuildTokenSecret(a.job, *token));
      !s.ok())
    return Failed(a, s, "creating the token Secret");
  MutexLock lock(mu_);
  secret_ensured_.insert(a.job.uid);
  return std::nullopt;
}

std::optional<ReconcileOutcome> Reconciler::EnsureRendezvous(Attempt& a) {
  if (!a.plan.ensure_rendezvous) return std::nullopt;
  if (auto outcome = EnsureTokenSecret(a)) return outcome;
  for (const Json& svc : {BuildRendezvousService(a.job), BuildWorkersService(a.job)}) {
    if (services_.Get(a.ns, svc["metadata"]["name"])) continue;
    if (auto s = writer_.EnsureCreated(kube::kServices, a.ns, svc); !s.ok())
      return Failed(a, s, "creating a Service");
  }
  if (a.plan.recreate_rendezvous && a.input.rendezvous) {
    const Json& meta = a.input.rendezvous->at("metadata");
    if (auto s = writer_.DeletePod(a.ns, meta.value("name", ""), meta.value("uid", "")); !s.ok())
      return Failed(a, s, "deleting the failed rendezvous pod");
    events_.Record(a.ref, "Warning", "RendezvousRestarted",
                   "the rendezvous pod failed; re-creating it");
  } else if (!a.input.rendezvous) {
    bool created = false;
    const HorovodJob& shape = a.rendezvous_job ? *a.rendezvous_job : a.job;
    if (auto s = writer_.EnsureCreated(kube::kPods, a.ns, BuildRendezvousPod(shape), &created);
        !s.ok())
      return Failed(a, s, "creating the rendezvous pod");
    if (created)
      events_.Record(a.ref, "Normal", "SuccessfulCreatePod",
                     "created rendezvous pod " + RendezvousName(a.job));
  }
  if (a.job.spec.scheduling.gang && options_.podgroups_available) {
    if (auto s = writer_.EnsureCreated(kube::kPodGroups, a.ns, BuildPodGroup(a.job)); !s.ok())
      return Failed(a, s, "creating the PodGroup");
  }
  return EnsureDisruptionBudget(a);
}

std::optional<ReconcileOutcome> Reconciler::EnsureDisruptionBudget(Attempt& a) {
  if (!options_.disruption_budgets) return std::nullopt;
  const int32_t min_available = a.job.spec.min_replicas;
  {
    MutexLock lock(mu_);
    auto it = budget_ensured_.find(a.job.uid);
    if (it != budget_ensured_.end() && it->second == min_available) return std::nullopt;
  }
  const Json budget = BuildDisruptionBudget(a.job);
  auto created = client_.Post(kube::kPodDisruptionBudgets.CollectionPath(a.ns), budget);
  if (!created.ok() && created.status().code() != kube::ApiCode::kAlreadyExists)
    return Failed(a, created.status(), "creating the PodDisruptionBudget");
  if (!created.ok()) {  // it exists: minReplicas may have changed since
    const Json patch = {{"spec", {{"minAvailable", min_available}}}};
    auto r = client_.Patch(kube::kPodDisruptionBudgets.ObjectPath(a.ns, a.job.name), patch.dump(),
                           kube::PatchType::kMerge);
    if (!r.ok()) return Failed(a, r.status(), "updating the PodDisruptionBudget");
  }
  MutexLock lock(mu_);
  budget_ensured_[a.job.uid] = min_available;
  return std::nullopt;
}

std::optional<ReconcileOutcome> Reconciler::DeletePods(Attempt& a) {
  const auto& deletions = a.plan.delete_pods;
  auto s = writer_.ForEachParallel(deletions.size(), [&](size_t i) {
    return writer_.DeletePod(a.ns, deletions[i].name, deletions[i].uid, deletions[i].force);
  });
  if (!s.ok()) return Failed(a, s, "deleting pods");
  if (deletions.empty()) return std::nullopt;
  std::string names;
  for (size_t i = 0; i < deletions.size() && i < 8; ++i)
    names += (i ? ", " : "") + deletions[i].name;
  if (deletions.size() > 8) names += ", ...";
  events_.Record(a.ref, "Normal", "SuccessfulDeletePod",
                 "deleted " + std::to_string(deletions.size()) + " pod(s) (" + deletions[0].reason +
                     "): " + names);
  return std::nullopt;
}

std::optional<ReconcileOutcome> Reconciler::CreateWorkers(Attempt& a) {
  // A pod created by an earlier reconcile that the cache does not show yet
  // is not created again (controller/write_expectations.h).
  std::vector<int> indices;
  for (int index : a.plan.create_workers)
    if (!a.created_unseen.count(WorkerPodName(a.job, index))) indices.push_back(index);
  if (indices.empty()) return std::nullopt;
  std::atomic<int> created{0};
  auto s = writer_.ForEachParallel(indices.size(), [&](size_t i) {
    bool made = false;
    auto st = writer_.EnsureCreated(kube::kPods, a.ns,
                                    BuildWorkerPod(a.job, indices[i], a.plan.avoid_nodes), &made);
    if (made) {
      created++;
      expectations_.ExpectCreated(a.job.uid, a.key, WorkerPodName(a.job, indices[i]));
    }
    return st;
  });
  if (created > 0)
    events_.Record(a.ref, "Normal", "SuccessfulCreatePod",
                   "created " + std::to_string(created.load()) + " worker pod(s)" +
                       (s.ok() ? ", e.g. " + WorkerPodName(a.job, indices.front()) : ""));
  if (!s.ok()) return Failed(a, s, "creating worker pods");
  return std::nullopt;
}

std::optional<ReconcileOutcome> Reconciler::WriteStatus(Attempt& a) {
  // Only when it changed: PUT with our resourceVersion, so a stale view loses
  // with 409 and is retried against the fresh object.
  if (EncodeStatus(a.plan.status) == a.object->value("status", Json::object())) return std::nullopt;
  kube::ApiStatus s = PutStatus(a);
  if (s.ok()) return std::nullopt;
  if (s.code() == kube::ApiCode::kNotFound) return ReconcileOutcome{};
  return Failed(a, s, "updating the status");
}

ReconcileOutcome Reconciler::Finish(Attempt& a) {
  for (const auto& e : a.plan.events) events_.Record(a.ref, e.type, e.reason, e.message);
  if (IsFinished(a.plan.status.phase)) {
    if (monitor_) monitor_->Untrack(a.key);
    expectations_.Forget(a.job.uid);
    MutexLock lock(mu_);
    secret_ensured_.erase(a.job.uid);
    budget_ensured_.erase(a.job.uid);
  }
  if (a.plan.requeue_after)
    return {ReconcileOutcome::kRequeueAfter,
            std::chrono::duration_cast<std::chrono::milliseconds>(*a.plan.requeue_after), ""};
  return {};
}

}  // namespace khorovod::op
