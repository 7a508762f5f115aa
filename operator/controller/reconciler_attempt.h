// Reconciler::Attempt: the state one Reconcile call carries through its
// phases (controller/reconciler.h). Private to the reconciler's own files
// (reconciler.cc, reconciler_kueue.cc).
//
// Thread-safety: owned by one Reconcile call.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "controller/job_plan.h"
#include "controller/kueue_workload.h"
#include "controller/reconciler.h"
#include "kube/event_recorder.h"

namespace khorovod::op {

struct Reconciler::Attempt {
  std::string key, ns, name;
  kube::ObjectPtr object;  // the job as last read or written
  HorovodJob job;
  kube::ObjectRef ref;
  PlanInput input;
  JobPlan plan;
  // Kueue: the job's Workload from the cache (queued jobs only) and what it says.
  kube::ObjectPtr workload;
  WorkloadAdmission admission;
  bool stale_workload = false;  // a Workload of an earlier job of this name is in the way
  // The job as the rendezvous pod is built from, when its admitted flavors
  // differ from the workers' (ResolveFlavors).
  std::optional<HorovodJob> rendezvous_job;
  // Worker pods this operator created that the cache does not show yet.
  std::set<std::string> created_unseen;
};

}  // namespace khorovod::op
