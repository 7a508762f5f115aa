// The reconciler's Kueue phases (controller/reconciler.h, phase 6): observing
// the job's Workload, writing it, and reading the ResourceFlavors it was
// admitted with. The rules live in controller/kueue_workload.h.
#include <vector>

#include "controller/job_plan.h"
#include "controller/kueue_workload.h"
#include "controller/reconciler.h"
#include "controller/reconciler_attempt.h"

namespace khorovod::op {
namespace {

// The Workload belongs to this incarnation of the job (a Workload left by a
// deleted job of the same name is not, until garbage collection removes it).
bool OwnedBy(const Json& workload, const HorovodJob& job) {
  for (const auto& ref : workload.at("metadata").value("ownerReferences", Json::array()))
    if (ref.value("uid", "") == job.uid && ref.value("controller", false)) return true;
  return false;
}

}  // namespace

void Reconciler::ObserveWorkload(Attempt& a) {
  if (!workloads_ || !QueuedByKueue(a.job)) return;
  a.workload = workloads_->Get(a.ns, WorkloadName(a.job));
  if (a.workload && OwnedBy(*a.workload, a.job)) {
    a.admission = ReadAdmission(*a.workload, a.job.spec.max_replicas);
  } else if (a.workload) {
    a.admission.message =
        "waiting for the Workload of an earlier job named " + a.job.name + " to be deleted";
    a.workload = nullptr;
    a.stale_workload = true;
  } else {
    a.admission.message = "creating Kueue Workload " + WorkloadName(a.job);
  }
  a.input.admission = AdmissionGate{a.admission.admitted, a.admission.workers, a.admission.message};
}

std::optional<ReconcileOutcome> Reconciler::SyncWorkload(Attempt& a) {
  if (!a.input.admission) return std::nullopt;
  const bool finished = IsFinished(a.plan.status.phase);
  if (!a.workload) {
    if (finished || a.stale_workload) return std::nullopt;
    bool created = false;
    if (auto s = writer_.EnsureCreated(kWorkloads, a.ns, BuildWorkload(a.job), &created); !s.ok())
      return Failed(a, s, "creating the Kueue Workload");
    if (created)
      events_.Record(a.ref, "Normal", "CreatedWorkload",
                     "created Kueue Workload " + WorkloadName(a.job));
    return std::nullopt;
  }
  const std::string now = FormatTime(a.input.now);
  Json updated;
  std::string event;
  if (finished && !a.admission.finished) {
    const bool succeeded = a.plan.status.phase == JobPhase::kSucceeded;
    updated = WorkloadFinished(*a.workload, succeeded, now,
                               std::string("HorovodJob ") + (succeeded ? "succeeded" : "failed"));
  } else if (!finished && a.admission.evicted && a.admission.quota_reserved &&
             a.input.workers.empty() && !a.input.rendezvous) {
    // Every pod is gone: the quota can go back to the queue.
    updated = WorkloadWithoutQuota(*a.workload, now, a.admission.message);
    event = "gave Kueue quota back after eviction; the job waits for admission again";
  } else {
    return std::nullopt;
  }
  const std::string path = kWorkloads.ObjectPath(a.ns, WorkloadName(a.job)) + "/status";
  if (auto r = client_.Put(path, updated); !r.ok()) {
    if (r.status().code() == kube::ApiCode::kNotFound) return std::nullopt;
    return Failed(a, r.status(), "updating the Kueue Workload's status");
  }
  if (!event.empty()) events_.Record(a.ref, "Normal", "QuotaReleased", event);
  return std::nullopt;
}

std::optional<ReconcileOutcome> Reconciler::ResolveFlavors(Attempt& a) {
  if (!a.admission.admitted) return std::nullopt;
  const bool rendezvous_next = a.plan.ensure_rendezvous && !a.input.rendezvous;
  if (a.plan.create_workers.empty() && !rendezvous_next) return std::nullopt;
  std::vector<Json> worker_flavors, rendezvous_flavors;
  auto fetch = [&](const std::vector<std::string>& names,
                   std::vector<Json>& out) -> kube::ApiStatus {
    for (const auto& name : names) {
      auto r = client_.Get(kResourceFlavors.ObjectPath("", name));
      if (!r.ok()) return r.status();
      out.push_back(std::move(r).value());
    }
    return kube::ApiStatus::Ok();
  };
  if (auto s = fetch(a.admission.worker_flavors, worker_flavors); !s.ok())
    return Failed(a, s, "reading the admitted ResourceFlavors");
  if (auto s = fetch(a.admission.rendezvous_flavors, rendezvous_flavors); !s.ok())
    return Failed(a, s, "reading the admitted ResourceFlavors");
  // The rendezvous pod inherits the worker template's placement: build it
  // from a copy that carries its own pod set's flavors instead.
  a.rendezvous_job = a.job;
  ApplyFlavors(a.rendezvous_job->spec.worker_template["spec"], rendezvous_flavors);
  ApplyFlavors(a.job.spec.worker_template["spec"], worker_flavors);
  return std::nullopt;
}

}  // namespace khorovod::op
