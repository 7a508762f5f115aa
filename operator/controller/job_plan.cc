#include "controller/job_plan.h"

#include <algorithm>
#include <ctime>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "controller/builders.h"
#include "kube/leader_election.h"

namespace khorovod::op {
namespace {

struct PodView {
  const Json* pod;
  int index;
  std::string name, uid, phase, reason;
  bool deleting, ready;
  int exit_code;  // first non-zero terminated exit code, 0 if none, -1 if unknown
};

PodView View(const Json& pod) {
  PodView v{&pod, WorkerIndexOf(pod), "", "", "", "", false, false, -1};
  const Json& meta = pod.at("metadata");
  v.name = meta.value("name", "");
  v.uid = meta.value("uid", "");
  v.deleting = meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null();
  const Json& st = pod.value("status", Json::object());
  v.phase = st.value("phase", "Pending");
  v.reason = st.value("reason", "");
  for (const auto& c : st.value("conditions", Json::array()))
    if (c.value("type", "") == "Ready" && c.value("status", "") == "True") v.ready = true;
  for (const auto& cs : st.value("containerStatuses", Json::array())) {
    const Json& state = cs.value("state", Json::object());
    if (!state.contains("terminated")) continue;
    int code = state["terminated"].value("exitCode", 0);
    if (v.exit_code <= 0) v.exit_code = code;
  }
  return v;
}

Condition* FindCondition(HorovodJobStatus& s, const std::string& type) {
  for (auto& c : s.conditions)
    if (c.type == type) return &c;
  return nullptr;
}

bool IsTrue(const HorovodJobStatus& s, const std::string& type) {
  for (const auto& c : s.conditions)
    if (c.type == type) return c.status == "True";
  return false;
}

// Sets a condition; lastTransitionTime moves only when the status flips.
void SetCondition(HorovodJobStatus& s, const std::string& type, bool value, const std::string& reason,
                  const std::string& message, const std::string& now) {
  const std::string status = value ? "True" : "False";
  Condition* c = FindCondition(s, type);
  if (!c) {
    if (!value) return;  // absent means False; don't add noise
    s.conditions.push_back({type, status, reason, message, now});
    return;
  }
  if (c->status != status) c->last_transition_time = now;
  c->status = status;
  c->reason = reason;
  c->message = message;
}

bool Retryable(const PodView& p, RestartPolicy policy) {
  if (policy == RestartPolicy::kNever) return false;
  if (policy == RestartPolicy::kOnFailure) return true;
  if (p.reason == "Evicted" || p.reason == "Preempting" || p.reason == "DeadlineExceeded") return true;
  return p.exit_code < 0 || p.exit_code >= 128;
}

}  // namespace

std::string FormatTime(std::chrono::system_clock::time_point t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  std::ostringstream ss;
  ss << std::put_time(&tm, "%Y-%m-%dT%H:%M:%SZ");
  return ss.str();
}

JobPlan PlanJob(const PlanInput& in) {
  const HorovodJob& job = *in.job;
  const HorovodJobSpec& spec = job.spec;
  JobPlan plan;
  plan.status = job.status;
  HorovodJobStatus& st = plan.status;
  const std::string now = FormatTime(in.now);
  st.observed_generation = job.generation;
  if (in.rendezvous_generation) st.rendezvous_generation = in.rendezvous_generation;
  st.selector = WorkerSelector(job);
  SetCondition(st, "Created", true, "HorovodJobCreated", "HorovodJob " + job.name + " is created", now);

  std::vector<PodView> pods;
  for (const auto& w : in.workers) pods.push_back(View(w));
  std::sort(pods.begin(), pods.end(), [](const PodView& a, const PodView& b) { return a.index > b.index; });

  // Counts from what is observed now.
  st.replicas = st.ready_replicas = st.active = st.failed = st.succeeded = 0;
  for (const auto& p : pods) {
    if (p.phase == "Failed") st.failed++;
    if (p.phase == "Succeeded") st.succeeded++;
    if (p.deleting) continue;
    if (p.phase == "Pending" || p.phase == "Running") {
      st.replicas++;
      st.active++;
      if (p.phase == "Running" && p.ready) st.ready_replicas++;
    }
  }

  const bool finished = st.phase == "Succeeded" || st.phase == "Failed";
  auto finish = [&](bool success, const std::string& reason, const std::string& message) {
    st.phase = success ? "Succeeded" : "Failed";
    SetCondition(st, success ? "Succeeded" : "Failed", true, reason, message, now);
    SetCondition(st, "Running", false, reason, message, now);
    SetCondition(st, "Restarting", false, reason, message, now);
    SetCondition(st, "Scaling", false, reason, message, now);
    if (st.completion_time.empty()) st.completion_time = now;
    plan.events.push_back({success ? "Normal" : "Warning", reason, message});
  };
  auto cleanup_and_ttl = [&]() {
    for (const auto& p : pods) {
      if (p.deleting) continue;
      bool live = p.phase == "Pending" || p.phase == "Running";
      if (spec.run_policy.clean_pod_policy == CleanPodPolicy::kAll ||
          (spec.run_policy.clean_pod_policy == CleanPodPolicy::kRunning && live))
        plan.delete_pods.push_back({p.name, p.uid, "job finished (cleanPodPolicy " +
                                                        std::string(ToString(spec.run_policy.clean_pod_policy)) + ")"});
    }
    if (in.rendezvous && spec.run_policy.clean_pod_policy != CleanPodPolicy::kNone) {
      PodView r = View(*in.rendezvous);
      if (!r.deleting) plan.delete_pods.push_back({r.name, r.uid, "job finished"});
    }
    if (spec.run_policy.ttl_seconds_after_finished) {
      std::chrono::system_clock::time_point done;
      if (kube::ParseTime(st.completion_time, done)) {
        auto expiry = done + std::chrono::seconds(*spec.run_policy.ttl_seconds_after_finished);
        if (in.now >= expiry) plan.delete_job = true;
        else plan.requeue_after = std::chrono::ceil<std::chrono::seconds>(expiry - in.now);
      }
    }
  };

  if (finished) {
    cleanup_and_ttl();
    return plan;
  }

  // Invalid spec: terminal, never a crash loop.
  std::vector<FieldError> errors = in.decode_errors;
  for (auto& e : Validate(spec)) errors.push_back(e);
  if (!errors.empty()) {
    finish(false, "InvalidSpec", JoinErrors(errors));
    cleanup_and_ttl();
    return plan;
  }

  // Suspend: no pods; the job and its status stay.
  if (spec.run_policy.suspend) {
    for (const auto& p : pods)
      if (!p.deleting) plan.delete_pods.push_back({p.name, p.uid, "job suspended"});
    if (in.rendezvous && !View(*in.rendezvous).deleting)
      plan.delete_pods.push_back({View(*in.rendezvous).name, View(*in.rendezvous).uid, "job suspended"});
    if (!IsTrue(st, "Suspended")) plan.events.push_back({"Normal", "Suspended", "HorovodJob suspended: pods deleted"});
    SetCondition(st, "Suspended", true, "Suspended", "spec.runPolicy.suspend is true", now);
    SetCondition(st, "Running", false, "Suspended", "the job is suspended", now);
    st.phase = "Suspended";
    return plan;
  }
  if (IsTrue(st, "Suspended")) {
    SetCondition(st, "Suspended", false, "Resumed", "spec.runPolicy.suspend is false", now);
    plan.events.push_back({"Normal", "Resumed", "HorovodJob resumed: re-creating pods"});
  }
  if (st.start_time.empty()) st.start_time = now;

  if (spec.run_policy.active_deadline_seconds) {
    std::chrono::system_clock::time_point started;
    if (kube::ParseTime(st.start_time, started)) {
      auto deadline = started + std::chrono::seconds(*spec.run_policy.active_deadline_seconds);
      if (in.now >= deadline) {
        finish(false, "DeadlineExceeded",
               "the job ran longer than activeDeadlineSeconds=" + std::to_string(*spec.run_policy.active_deadline_seconds));
        cleanup_and_ttl();
        return plan;
      }
      plan.requeue_after = std::chrono::ceil<std::chrono::seconds>(deadline - in.now);
    }
  }

  // Completion.
  if (st.succeeded > 0) {
    if (st.active == 0) {
      finish(true, "JobSucceeded", "training finished: " + std::to_string(st.succeeded) + " worker(s) exited 0");
      cleanup_and_ttl();
    } else {
      SetCondition(st, "Running", true, "Completing", "a worker exited 0; waiting for the others to finish", now);
    }
    return plan;
  }

  // Failed workers.
  const std::set<std::string> counted(in.already_counted.begin(), in.already_counted.end());
  std::set<int> being_replaced;
  int new_failures = 0;
  for (const auto& p : pods) {
    if (p.deleting || p.phase != "Failed") continue;
    if (!Retryable(p, spec.run_policy.restart_policy)) {
      finish(false, "WorkerFailed",
             "worker " + p.name + " failed with exit code " + std::to_string(p.exit_code) +
                 (p.reason.empty() ? "" : " (" + p.reason + ")") + "; restartPolicy " +
                 ToString(spec.run_policy.restart_policy) + " does not retry it");
      cleanup_and_ttl();
      return plan;
    }
    if (!counted.count(p.uid)) {
      new_failures++;
      plan.counted_failures.push_back(p.uid);
    }
    if (st.restart_count + new_failures > spec.run_policy.backoff_limit) {
      st.restart_count += new_failures;
      finish(false, "BackoffLimitExceeded",
             "worker " + p.name + " failed (exit code " + std::to_string(p.exit_code) + "); " +
                 std::to_string(st.restart_count) + " restarts exceed backoffLimit " +
                 std::to_string(spec.run_policy.backoff_limit));
      cleanup_and_ttl();
      return plan;
    }
    plan.delete_pods.push_back({p.name, p.uid, "worker failed (exit code " + std::to_string(p.exit_code) + ")"});
    plan.events.push_back({"Warning", "WorkerFailed",
                           "worker " + p.name + " failed (exit code " + std::to_string(p.exit_code) +
                               (p.reason.empty() ? "" : ", " + p.reason) + "); replacing it"});
    being_replaced.insert(p.index);
  }
  st.restart_count += new_failures;

  // Scale to the desired count.
  const int desired = spec.replicas;
  std::set<int> present;
  int surplus = 0;
  bool surplus_present = false;  // includes workers above the size still terminating
  for (const auto& p : pods) {
    if (p.index < 0) continue;
    present.insert(p.index);  // terminating pods still hold their name
    if (p.index >= desired && (p.phase == "Pending" || p.phase == "Running")) surplus_present = true;
    if (p.index >= desired && !p.deleting && !being_replaced.count(p.index)) {
      plan.delete_pods.push_back({p.name, p.uid, "scale down to " + std::to_string(desired)});
      surplus++;
    }
  }
  for (int i = 0; i < desired; ++i)
    if (!present.count(i)) plan.create_workers.push_back(i);
  plan.ensure_rendezvous = true;
  if (in.rendezvous) {
    PodView r = View(*in.rendezvous);
    if (!r.deleting && (r.phase == "Failed" || r.phase == "Succeeded")) plan.recreate_rendezvous = true;
  }

  // Conditions and phase.
  const bool restarting = !being_replaced.empty() ||
                          (IsTrue(st, "Restarting") && st.ready_replicas < desired);
  // Filling a new job is not scaling; changing the size of a running one is.
  const bool was_running = IsTrue(job.status, "Running") || IsTrue(job.status, "Scaling");
  const bool resizing = surplus > 0 || (!plan.create_workers.empty() && !restarting && was_running);
  // Scaling lasts until the new size is ready, not just while pods are written.
  const bool scaling =
      resizing || surplus_present || (IsTrue(st, "Scaling") && !restarting && st.ready_replicas != desired);
  if (!being_replaced.empty())
    SetCondition(st, "Restarting", true, "WorkerFailed",
                 std::to_string(being_replaced.size()) + " worker(s) failed and are being replaced", now);
  else if (!restarting)
    SetCondition(st, "Restarting", false, "WorkersReady", "no worker is being replaced", now);
  if (scaling) {
    if (!IsTrue(st, "Scaling"))
      plan.events.push_back({"Normal", "Scaling", "scaling workers from " + std::to_string(st.replicas) + " to " +
                                                      std::to_string(desired)});
    SetCondition(st, "Scaling", true, "ReplicasChanged",
                 "scaling workers from " + std::to_string(st.replicas) + " to " + std::to_string(desired), now);
  } else {
    SetCondition(st, "Scaling", false, "ReplicasReached", std::to_string(desired) + " worker(s) present", now);
  }
  const bool running = st.ready_replicas >= spec.min_replicas;
  if (running && !IsTrue(st, "Running"))
    plan.events.push_back({"Normal", "Running", std::to_string(st.ready_replicas) + " worker(s) ready"});
  SetCondition(st, "Running", running, running ? "WorkersReady" : "WorkersNotReady",
               std::to_string(st.ready_replicas) + " of " + std::to_string(desired) + " worker(s) ready (min " +
                   std::to_string(spec.min_replicas) + ")",
               now);
  st.phase = restarting ? "Restarting" : scaling ? "Scaling" : running ? "Running" : "Created";
  return plan;
}

}  // namespace khorovod::op
