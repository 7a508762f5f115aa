#include "controller/reconciler.h"

#include <atomic>
#include <iostream>
#include <thread>

#include "controller/builders.h"
#include "controller/job_plan.h"
#include "controller/rendezvous_probe.h"
#include "kube/resource.h"

namespace khorovod::op {

Reconciler::Reconciler(kube::RestClient& client, kube::Informer& jobs, kube::Informer& pods,
                       kube::Informer& services, kube::EventRecorder& events, ReconcilerOptions options)
    : client_(client), jobs_(jobs), pods_(pods), services_(services), events_(events), options_(options) {}

std::map<std::string, int> Reconciler::PhaseCounts() const {
  std::map<std::string, int> counts;
  for (const auto& obj : jobs_.List()) {
    std::string phase = obj->value("status", Json::object()).value("phase", "");
    counts[phase.empty() ? "Created" : phase]++;
  }
  return counts;
}

kube::ApiStatus Reconciler::EnsureCreated(const kube::ResourceType& type, const std::string& ns, const Json& object,
                                          bool* created) {
  auto result = client_.Post(type.CollectionPath(ns), object);
  if (created) *created = result.ok();
  if (result.ok() || result.status().code() == kube::ApiCode::kAlreadyExists) return kube::ApiStatus::Ok();
  return result.status();
}

kube::ApiStatus Reconciler::DeletePod(const std::string& ns, const std::string& name, const std::string& uid) {
  Json options = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"propagationPolicy", "Background"}};
  if (!uid.empty()) options["preconditions"] = {{"uid", uid}};
  auto result = client_.Delete(kube::kPods.ObjectPath(ns, name), options);
  if (result.ok() || result.status().code() == kube::ApiCode::kNotFound ||
      result.status().code() == kube::ApiCode::kConflict /* another incarnation: nothing to do */)
    return kube::ApiStatus::Ok();
  return result.status();
}

kube::ApiStatus Reconciler::ForEachParallel(size_t n, const std::function<kube::ApiStatus(size_t)>& op) {
  if (n == 0) return kube::ApiStatus::Ok();
  std::atomic<size_t> next{0};
  std::mutex mu;
  kube::ApiStatus first_error;
  auto worker = [&] {
    for (size_t i; (i = next++) < n;) {
      kube::ApiStatus s = op(i);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) first_error = s;
      }
    }
  };
  size_t threads = std::min<size_t>(n, static_cast<size_t>(std::max(1, options_.write_parallelism)));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  return first_error;
}

ReconcileOutcome Reconciler::Reconcile(const std::string& key) {
  const auto slash = key.find('/');
  const std::string ns = key.substr(0, slash), name = key.substr(slash + 1);
  kube::ObjectPtr object = jobs_.Get(ns, name);
  if (!object) {
    return {};  // deleted: its pods, services and secret are garbage-collected
  }
  std::vector<FieldError> decode_errors;
  HorovodJob job = DecodeHorovodJob(*object, decode_errors);
  if (job.deleting) return {};
  const kube::ObjectRef ref{kApiVersion, kKind, job.namespace_, job.name, job.uid};

  PlanInput input;
  input.job = &job;
  input.decode_errors = decode_errors;
  input.now = std::chrono::system_clock::now();
  for (const auto& pod : pods_.ByOwner(job.uid)) {
    const std::string role = pod->at("metadata").value("labels", Json::object()).value(kLabelRole, "");
    if (role == "worker") input.workers.push_back(*pod);
    else if (role == "rendezvous") input.rendezvous = *pod;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto& counted = counted_failures_[job.uid];
    input.already_counted.assign(counted.begin(), counted.end());
  }
  if (input.rendezvous && options_.rendezvous_refresh.count() > 0) {
    const Json& st = input.rendezvous->value("status", Json::object());
    if (st.value("phase", "") == "Running" && !input.rendezvous->at("metadata").contains("deletionTimestamp"))
      input.rendezvous_generation =
          ProbeRendezvousGeneration(st.value("podIP", ""), kRendezvousMetricsPort, options_.probe_timeout);
  }
  JobPlan plan = PlanJob(input);

  auto fail = [&](const kube::ApiStatus& s, const std::string& what) -> ReconcileOutcome {
    const std::string message = what + ": " + s.ToString();
    // The job's namespace is being deleted: nothing can be created there any
    // more, and the job goes with it. Not an error worth an event.
    if (s.code() == kube::ApiCode::kForbidden && s.message().find("is being terminated") != std::string::npos)
      return {};
    if (s.retryable()) return {ReconcileOutcome::kRetry, {}, message};
    events_.Record(ref, "Warning", "ReconcileError", message);
    return {ReconcileOutcome::kTerminal, {}, message};
  };

  // A failure consumes a restart only once the status saying so is stored:
  // write it before deleting the failed pods, so a lost status write (409)
  // is retried against pods that still show the failure.
  if (!plan.counted_failures.empty()) {
    Json updated = *object;
    updated["status"] = EncodeStatus(plan.status);
    auto r = client_.Put(kHorovodJobs.ObjectPath(ns, name) + "/status", updated);
    if (!r.ok()) return r.status().code() == kube::ApiCode::kNotFound ? ReconcileOutcome{} : fail(r.status(), "recording the restart count");
    object = std::make_shared<const Json>(r.value());
    std::lock_guard<std::mutex> lock(mu_);
    counted_failures_[job.uid].insert(plan.counted_failures.begin(), plan.counted_failures.end());
  }

  if (plan.delete_job) {
    Json options = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"propagationPolicy", "Background"},
                    {"preconditions", {{"uid", job.uid}}}};
    auto r = client_.Delete(kHorovodJobs.ObjectPath(ns, name), options);
    if (!r.ok() && r.status().code() != kube::ApiCode::kNotFound) return fail(r.status(), "deleting the finished job");
    return {};
  }

  if (plan.ensure_rendezvous) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!secret_ensured_.count(job.uid)) {
        lock.unlock();
        if (auto s = EnsureCreated(kube::kSecrets, ns, BuildTokenSecret(job, NewToken()), nullptr); !s.ok())
          return fail(s, "creating the token Secret");
        lock.lock();
        secret_ensured_.insert(job.uid);
      }
    }
    for (const Json& svc : {BuildRendezvousService(job), BuildWorkersService(job)}) {
      if (services_.Get(ns, svc["metadata"]["name"])) continue;
      if (auto s = EnsureCreated(kube::kServices, ns, svc, nullptr); !s.ok()) return fail(s, "creating a Service");
    }
    if (plan.recreate_rendezvous && input.rendezvous) {
      const Json& meta = input.rendezvous->at("metadata");
      if (auto s = DeletePod(ns, meta.value("name", ""), meta.value("uid", "")); !s.ok())
        return fail(s, "deleting the failed rendezvous pod");
      events_.Record(ref, "Warning", "RendezvousRestarted", "the rendezvous pod failed; re-creating it");
    } else if (!input.rendezvous) {
      bool created = false;
      if (auto s = EnsureCreated(kube::kPods, ns, BuildRendezvousPod(job), &created); !s.ok())
        return fail(s, "creating the rendezvous pod");
      if (created) events_.Record(ref, "Normal", "SuccessfulCreatePod", "created rendezvous pod " + RendezvousName(job));
    }
    if (job.spec.scheduling.gang && options_.podgroups_available) {
      if (auto s = EnsureCreated(kube::kPodGroups, ns, BuildPodGroup(job), nullptr); !s.ok())
        return fail(s, "creating the PodGroup");
    }
  }

  // Deletions first (highest worker indices first, as planned), then creations.
  if (auto s = ForEachParallel(plan.delete_pods.size(),
                               [&](size_t i) {
                                 const auto& d = plan.delete_pods[i];
                                 return DeletePod(ns, d.name, d.uid);
                               });
      !s.ok())
    return fail(s, "deleting pods");
  if (!plan.delete_pods.empty()) {
    std::string names;
    for (size_t i = 0; i < plan.delete_pods.size() && i < 8; ++i) names += (i ? ", " : "") + plan.delete_pods[i].name;
    if (plan.delete_pods.size() > 8) names += ", ...";
    events_.Record(ref, "Normal", "SuccessfulDeletePod",
                   "deleted " + std::to_string(plan.delete_pods.size()) + " pod(s) (" + plan.delete_pods[0].reason +
                       "): " + names);
  }
  std::atomic<int> created{0};
  if (auto s = ForEachParallel(plan.create_workers.size(),
                               [&](size_t i) {
                                 bool made = false;
                                 auto st = EnsureCreated(kube::kPods, ns, BuildWorkerPod(job, plan.create_workers[i]), &made);
                                 if (made) created++;
                                 return st;
                               });
      !s.ok()) {
    if (created > 0)
      events_.Record(ref, "Normal", "SuccessfulCreatePod", "created " + std::to_string(created.load()) + " worker pod(s)");
    return fail(s, "creating worker pods");
  }
  if (created > 0)
    events_.Record(ref, "Normal", "SuccessfulCreatePod",
                   "created " + std::to_string(created.load()) + " worker pod(s), e.g. " +
                       WorkerPodName(job, plan.create_workers.front()));

  // Status, only when it changed: PUT with our resourceVersion, so a stale
  // view loses with 409 and is retried against the fresh object.
  Json new_status = EncodeStatus(plan.status);
  const Json old_status = object->value("status", Json::object());
  if (new_status != old_status) {
    Json updated = *object;
    updated["status"] = new_status;
    auto r = client_.Put(kHorovodJobs.ObjectPath(ns, name) + "/status", updated);
    if (!r.ok()) {
      if (r.status().code() == kube::ApiCode::kNotFound) return {};
      return fail(r.status(), "updating the status");
    }
  }
  for (const auto& e : plan.events) events_.Record(ref, e.type, e.reason, e.message);

  if (plan.status.phase == "Succeeded" || plan.status.phase == "Failed") {
    std::lock_guard<std::mutex> lock(mu_);
    counted_failures_.erase(job.uid);
  }
  // A running job's rendezvous generation changes without any pod event.
  const std::string& phase = plan.status.phase;
  const bool live = phase == "Running" || phase == "Restarting" || phase == "Scaling";
  if (live && options_.rendezvous_refresh.count() > 0 &&
      (!plan.requeue_after || *plan.requeue_after > options_.rendezvous_refresh))
    plan.requeue_after = options_.rendezvous_refresh;
  if (plan.requeue_after)
    return {ReconcileOutcome::kRequeueAfter, std::chrono::duration_cast<std::chrono::milliseconds>(*plan.requeue_after), ""};
  return {};
}

}  // namespace khorovod::op
