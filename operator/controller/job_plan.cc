#include "controller/job_plan.h"

#include <algorithm>
#include <ctime>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "controller/builders.h"
#include "controller/job_conditions.h"
#include "controller/pod_view.h"
#include "kube/leader_election.h"

namespace khorovod::op {
namespace {

namespace cond = condition;
using std::to_string;

// Everything the phases share: the input, the observed pods and the plan
// being built.
struct Planner {
  explicit Planner(const PlanInput& input)
      : in(input),
        job(*input.job),
        spec(input.job->spec),
        now(FormatTime(input.now)),
        desired(input.admission && input.admission->admitted
                    ? std::min(spec.replicas, input.admission->workers)
                    : spec.replicas) {
    plan.status = job.status;
    for (const auto& w : in.workers) pods.push_back(View(w));
    std::sort(pods.begin(), pods.end(),
              [](const PodView& a, const PodView& b) { return a.index > b.index; });
  }
  HorovodJobStatus& st() { return plan.status; }

  const PlanInput& in;
  const HorovodJob& job;
  const HorovodJobSpec& spec;
  const std::string now;
  const int desired;          // spec.replicas, capped by Kueue's admitted worker count
  std::vector<PodView> pods;  // highest worker index first
  JobPlan plan;
  std::set<int> being_replaced;  // indices of failed workers deleted by this plan
  int surplus = 0;               // workers above the size deleted by this plan
  bool surplus_present = false;  // workers above the size still live (terminating included)
};

// A phase either completes the plan (true) or passes on to the next.
using Phase = bool (*)(Planner&);

bool Planned(const Planner& p, const std::string& uid) {
  return std::any_of(p.plan.delete_pods.begin(), p.plan.delete_pods.end(),
                     [&](const PodDeletion& d) { return d.uid == uid; });
}

// Each pod is deleted once. A later phase that deletes a pod already planned
// (a failed worker on a lost node) gives the reason, which is about the pod
// itself; a forced deletion stays forced.
void PlanDeletion(Planner& p, PodDeletion d) {
  for (PodDeletion& planned : p.plan.delete_pods) {
    if (planned.uid != d.uid) continue;
    planned.reason = std::move(d.reason);
    planned.force = planned.force || d.force;
    return;
  }
  p.plan.delete_pods.push_back(std::move(d));
}

// Status fields that follow from what is observed, whatever the phase.
void Observe(Planner& p) {
  HorovodJobStatus& st = p.st();
  st.observed_generation = p.job.generation;
  if (p.in.rendezvous_generation) st.rendezvous_generation = p.in.rendezvous_generation;
  st.selector = WorkerSelector(p.job);
  SetCondition(st, cond::kCreated, true, "HorovodJobCreated",
               "HorovodJob " + p.job.name + " is created", p.now);
  st.replicas = st.ready_replicas = st.active = st.failed = st.succeeded = 0;
  std::set<std::string> observed;
  for (const auto& pod : p.pods) {
    observed.insert(pod.uid);
    if (pod.failed()) st.failed++;
    if (pod.succeeded()) st.succeeded++;
    if (pod.deleting || !pod.live()) continue;
    st.replicas++;
    st.active++;
    if (pod.phase == "Running" && pod.ready) st.ready_replicas++;
  }
  // GPUs: held by scheduled live workers (the kubelet allocated them), and
  // asked for by the desired size.
  const int gpus = p.spec.gpus_per_worker;
  st.gpus = st.gpus_wanted = 0;
  if (gpus > 0) {
    for (const auto& pod : p.pods)
      if (!pod.deleting && pod.live() && !pod.node.empty()) st.gpus += gpus;
    st.gpus_wanted = p.desired * gpus;
  }
  // Node avoidance ends after its cooldown.
  auto& avoided = st.avoided_nodes;
  avoided.erase(std::remove_if(avoided.begin(), avoided.end(),
                               [&](const AvoidedNode& n) {
                                 std::chrono::system_clock::time_point until;
                                 return !kube::ParseTime(n.until, until) || until <= p.in.now;
                               }),
                avoided.end());
  // A counted pod that is gone can never be seen again: forget its UID.
  auto& counted = st.counted_failures;
  counted.erase(std::remove_if(counted.begin(), counted.end(),
                               [&](const std::string& uid) { return !observed.count(uid); }),
                counted.end());
}

// cleanPodPolicy and ttlSecondsAfterFinished, for a finished job.
void CleanUpFinished(Planner& p) {
  const CleanPodPolicy policy = p.spec.run_policy.clean_pod_policy;
  for (const auto& pod : p.pods) {
    if (pod.deleting || Planned(p, pod.uid)) continue;
    if (policy == CleanPodPolicy::kAll || (policy == CleanPodPolicy::kRunning && pod.live()))
      p.plan.delete_pods.push_back(
          {pod.name, pod.uid,
           "job finished (cleanPodPolicy " + std::string(ToString(policy)) + ")"});
  }
  if (p.in.rendezvous && policy != CleanPodPolicy::kNone) {
    PodView r = View(*p.in.rendezvous);
    if (!r.deleting && !Planned(p, r.uid))
      p.plan.delete_pods.push_back({r.name, r.uid, "job finished"});
  }
  if (!p.spec.run_policy.ttl_seconds_after_finished) return;
  std::chrono::system_clock::time_point done;
  if (!kube::ParseTime(p.st().completion_time, done)) return;
  auto expiry = done + std::chrono::seconds(*p.spec.run_policy.ttl_seconds_after_finished);
  if (p.in.now >= expiry)
    p.plan.delete_job = true;
  else
    p.plan.requeue_after = std::chrono::ceil<std::chrono::seconds>(expiry - p.in.now);
}

// Moves the job to its final phase; always completes the plan.
bool Finish(Planner& p, bool success, const std::string& reason, const std::string& message) {
  HorovodJobStatus& st = p.st();
  st.phase = success ? JobPhase::kSucceeded : JobPhase::kFailed;
  SetCondition(st, success ? cond::kSucceeded : cond::kFailed, true, reason, message, p.now);
  for (const char* type : {cond::kRunning, cond::kRestarting, cond::kScaling})
    SetCondition(st, type, false, reason, message, p.now);
  if (st.completion_time.empty()) st.completion_time = p.now;
  p.plan.events.push_back({success ? "Normal" : "Warning", reason, message});
  CleanUpFinished(p);
  return true;
}

bool PlanFinished(Planner& p) {
  if (!IsFinished(p.st().phase)) return false;
  CleanUpFinished(p);
  return true;
}

bool PlanInvalidSpec(Planner& p) {
  if (p.in.spec_errors.empty()) return false;
  return Finish(p, false, "InvalidSpec", JoinErrors(p.in.spec_errors));
}

bool PlanSuspend(Planner& p) {
  HorovodJobStatus& st = p.st();
  const bool held = p.in.admission && !p.in.admission->admitted;
  if (p.spec.run_policy.suspend || held) {
    for (const auto& pod : p.pods)
      if (!pod.deleting) p.plan.delete_pods.push_back({pod.name, pod.uid, "job suspended"});
    if (p.in.rendezvous) {
      PodView r = View(*p.in.rendezvous);
      if (!r.deleting) p.plan.delete_pods.push_back({r.name, r.uid, "job suspended"});
    }
    const std::string reason = p.spec.run_policy.suspend ? "Suspended" : "WaitingForAdmission";
    const std::string why =
        p.spec.run_policy.suspend ? "spec.runPolicy.suspend is true" : p.in.admission->message;
    if (!IsTrue(st, cond::kSuspended))
      p.plan.events.push_back({"Normal", reason, "HorovodJob suspended: " + why});
    SetCondition(st, cond::kSuspended, true, reason, why, p.now);
    SetCondition(st, cond::kRunning, false, "Suspended", "the job is suspended", p.now);
    st.phase = JobPhase::kSuspended;
    return true;
  }
  if (IsTrue(st, cond::kSuspended)) {
    SetCondition(st, cond::kSuspended, false, "Resumed",
                 p.in.admission ? "admitted by Kueue" : "spec.runPolicy.suspend is false", p.now);
    p.plan.events.push_back({"Normal", "Resumed", "HorovodJob resumed: re-creating pods"});
  }
  if (st.start_time.empty()) st.start_time = p.now;
  return false;
}

bool PlanDeadline(Planner& p) {
  const auto& limit = p.spec.run_policy.active_deadline_seconds;
  std::chrono::system_clock::time_point started;
  if (!limit || !kube::ParseTime(p.st().start_time, started)) return false;
  auto deadline = started + std::chrono::seconds(*limit);
  if (p.in.now >= deadline)
    return Finish(p, false, "DeadlineExceeded",
                  "the job ran longer than activeDeadlineSeconds=" + to_string(*limit));
  p.plan.requeue_after = std::chrono::ceil<std::chrono::seconds>(deadline - p.in.now);
  return false;
}

bool PlanCompletion(Planner& p) {
  HorovodJobStatus& st = p.st();
  if (st.succeeded == 0) return false;
  // A worker never scheduled (e.g. short of GPUs) will not train any more:
  // delete it rather than wait for it. Nor is a worker of a lost node
  // waited for once PlanLostNodes force-deletes it: its kubelet will never
  // report it finished.
  int training = 0;
  for (const auto& pod : p.pods) {
    if (pod.deleting || !pod.live() || Planned(p, pod.uid)) continue;
    if (pod.phase == "Pending" && pod.node.empty())
      p.plan.delete_pods.push_back(
          {pod.name, pod.uid, "training finished before it was scheduled"});
    else
      training++;
  }
  if (training == 0)
    return Finish(p, true, "JobSucceeded",
                  "training finished: " + to_string(st.succeeded) + " worker(s) exited 0");
  SetCondition(st, cond::kRunning, true, "Completing",
               "a worker exited 0; waiting for the others to finish", p.now);
  return true;
}

// Keeps the job's new workers off `pod`'s node for the cooldown (extended if
// the node is avoided already): after a GPU failure there, or a lost node.
void AvoidNode(Planner& p, const PodView& pod, const std::string& reason) {
  const int32_t cooldown = p.spec.scheduling.node_cooldown_seconds;
  if (pod.node.empty() || cooldown <= 0) return;
  const std::string until = FormatTime(p.in.now + std::chrono::seconds(cooldown));
  auto& avoided = p.st().avoided_nodes;
  auto it = std::find_if(avoided.begin(), avoided.end(),
                         [&](const AvoidedNode& n) { return n.node == pod.node; });
  if (it != avoided.end())
    *it = {pod.node, until, reason};
  else
    avoided.push_back({pod.node, until, reason});
  p.plan.events.push_back(
      {"Warning", "NodeAvoided",
       reason + " on node " + pod.node + ": new workers avoid " + pod.node + " until " + until});
}

bool PlanFailures(Planner& p) {
  HorovodJobStatus& st = p.st();
  const RunPolicy& policy = p.spec.run_policy;
  const std::set<std::string> counted(st.counted_failures.begin(), st.counted_failures.end());
  int new_failures = 0;
  for (const auto& pod : p.pods) {
    if (pod.deleting || !(pod.failed() || (pod.live() && pod.gpu_failed()))) continue;
    const std::string exit = FailureText(pod);
    if (pod.disrupted && !pod.gpu_failed()) {
      // Evicted or preempted: the cluster stopped it (after it left at a
      // commit, docs/elastic.md); replaced, not counted against backoffLimit.
      PlanDeletion(p, {pod.name, pod.uid, "worker disrupted (" + exit + ")"});
      p.plan.events.push_back({"Normal", "WorkerDisrupted",
                               "worker " + pod.name + " was stopped by the cluster (" + exit +
                                   (pod.reason.empty() ? "" : ", " + pod.reason) +
                                   "); replacing it"});
      p.being_replaced.insert(pod.index);
      continue;
    }
    if (!Retryable(pod, policy.restart_policy))
      return Finish(p, false, "WorkerFailed",
                    "worker " + pod.name + " failed with " + exit +
                        (pod.reason.empty() ? "" : " (" + pod.reason + ")") + "; restartPolicy " +
                        ToString(policy.restart_policy) + " does not retry it");
    if (!counted.count(pod.uid)) {
      new_failures++;
      p.plan.counted_failures.push_back(pod.uid);
      st.counted_failures.push_back(pod.uid);
    }
    if (st.restart_count + new_failures > policy.backoff_limit) {
      st.restart_count += new_failures;
      return Finish(p, false, "BackoffLimitExceeded",
                    "worker " + pod.name + " failed (" + exit + "); " +
                        to_string(st.restart_count) + " restarts exceed backoffLimit " +
                        to_string(policy.backoff_limit));
    }
    if (pod.gpu_failed() && !counted.count(pod.uid))
      AvoidNode(p, pod, "GPU failure of " + pod.name + " (" + exit + ")");
    PlanDeletion(p, {pod.name, pod.uid, "worker failed (" + exit + ")"});
    // The restart number keeps each failure its own event: the recorder
    // writes identical events once per window, and `kubectl describe`
    // should show three failures of one index as three.
    p.plan.events.push_back(
        {"Warning", "WorkerFailed",
         "worker " + pod.name + " failed (" + exit + (pod.reason.empty() ? "" : ", " + pod.reason) +
             "); replacing it (restart " + to_string(st.restart_count + new_failures) + " of " +
             to_string(policy.backoff_limit) + " allowed)"});
    p.being_replaced.insert(pod.index);
  }
  st.restart_count += new_failures;
  return false;
}

// Pods bound to a lost node: force-deleted once the node has been lost for
// nodeLossTimeoutSeconds (job_plan.h, phase 5). Runs before the completion
// phase, which must not wait for a worker whose kubelet is gone. Never
// completes the plan.
bool PlanLostNodes(Planner& p) {
  const auto timeout = std::chrono::seconds(p.spec.run_policy.node_loss_timeout_seconds);
  // Once a worker exited 0 training is over: nothing is replaced.
  const bool over = p.st().succeeded > 0;
  std::vector<PodView> pods = p.pods;
  if (p.in.rendezvous) pods.push_back(View(*p.in.rendezvous));
  std::map<std::string, std::vector<std::string>> waiting, replaced;  // node -> pod names
  for (const PodView& pod : pods) {
    auto node = p.in.nodes.find(pod.node);
    if (pod.node.empty() || pod.succeeded() || node == p.in.nodes.end() || !node->second.lost ||
        !node->second.since)
      continue;
    const auto due = *node->second.since + timeout;
    if (p.in.now < due) {
      waiting[pod.node].push_back(pod.name);
      auto wait = std::chrono::ceil<std::chrono::seconds>(due - p.in.now);
      if (!p.plan.requeue_after || wait < *p.plan.requeue_after) p.plan.requeue_after = wait;
      continue;
    }
    replaced[pod.node].push_back(pod.name);
    PlanDeletion(p, {pod.name, pod.uid, "node " + pod.node + " lost", true});
    if (over) continue;
    if (pod.index >= 0) p.being_replaced.insert(pod.index);
    AvoidNode(p, pod, "node lost (" + node->second.why + ")");
  }
  auto names = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& n : v) s += (s.empty() ? "" : ", ") + n;
    return s;
  };
  std::string message;
  for (const auto& [node, list] : waiting) {
    const NodeHealth& h = p.in.nodes.at(node);
    const std::string due = FormatTime(*h.since + timeout);
    message +=
        (message.empty() ? "" : "; ") +
        ("node " + node + " lost (" + h.why + ") since " + FormatTime(*h.since) + ": " +
         names(list) + " will be force-deleted" + (over ? "" : " and replaced") + " at " + due);
  }
  for (const auto& [node, list] : replaced) {
    const std::string text =
        "node " + node + " lost (" + p.in.nodes.at(node).why + ") for " +
        to_string(timeout.count()) + " s (nodeLossTimeoutSeconds): force-deleting " + names(list) +
        (over ? " (training is over: not replaced)" : " and replacing them on other nodes");
    p.plan.events.push_back({"Warning", "NodeLost", text});
    message += (message.empty() ? "" : "; ") + text;
  }
  HorovodJobStatus& st = p.st();
  if (message.empty()) {
    // Only a job that had the condition gets it back as False.
    if (IsTrue(st, cond::kNodeLost))
      SetCondition(st, cond::kNodeLost, false, "NodesReady", "no worker is on a lost node", p.now);
    return false;
  }
  if (!waiting.empty() && !IsTrue(st, cond::kNodeLost))
    p.plan.events.push_back({"Warning", "NodeLost", message});
  SetCondition(st, cond::kNodeLost, true, "NodeLost", message, p.now);
  return false;
}

void PlanScaling(Planner& p) {
  const int desired = p.desired;
  std::set<int> present;
  for (const auto& pod : p.pods) {
    if (pod.index < 0) continue;
    present.insert(pod.index);  // terminating pods still hold their name
    if (pod.index >= desired && pod.live()) p.surplus_present = true;
    if (pod.index >= desired && !pod.deleting && !p.being_replaced.count(pod.index)) {
      p.plan.delete_pods.push_back({pod.name, pod.uid, "scale down to " + to_string(desired)});
      p.surplus++;
    }
  }
  for (int i = 0; i < desired; ++i)
    if (!present.count(i)) p.plan.create_workers.push_back(i);
  for (const auto& n : p.st().avoided_nodes) p.plan.avoid_nodes.push_back(n.node);
  // A worker waiting to be scheduled away from a node that is no longer
  // avoided would wait needlessly (affinity is immutable): re-create it.
  for (const auto& pod : p.pods) {
    if (pod.deleting || pod.phase != "Pending" || !pod.node.empty() || pod.index >= desired)
      continue;
    for (const auto& node : pod.avoided_nodes) {
      if (std::count(p.plan.avoid_nodes.begin(), p.plan.avoid_nodes.end(), node)) continue;
      p.plan.delete_pods.push_back({pod.name, pod.uid, "node " + node + " is no longer avoided"});
      break;
    }
  }
  // Look again when the first avoidance ends.
  for (const auto& n : p.st().avoided_nodes) {
    std::chrono::system_clock::time_point until;
    if (!kube::ParseTime(n.until, until)) continue;
    auto wait = std::chrono::ceil<std::chrono::seconds>(until - p.in.now) + std::chrono::seconds(1);
    if (!p.plan.requeue_after || wait < *p.plan.requeue_after) p.plan.requeue_after = wait;
  }
  p.plan.ensure_rendezvous = true;
  if (p.in.rendezvous) {
    PodView r = View(*p.in.rendezvous);
    if (!r.deleting && (r.failed() || r.succeeded())) p.plan.recreate_rendezvous = true;
  }
}

void PlanConditions(Planner& p) {
  HorovodJobStatus& st = p.st();
  const int desired = p.desired;
  const bool restarting =
      !p.being_replaced.empty() || (IsTrue(st, cond::kRestarting) && st.ready_replicas < desired);
  // Filling a new job is not scaling; changing the size of a running one is.
  const bool was_running =
      IsTrue(p.job.status, cond::kRunning) || IsTrue(p.job.status, cond::kScaling);
  const bool resizing =
      p.surplus > 0 || (!p.plan.create_workers.empty() && !restarting && was_running);
  // Scaling lasts until the new size is ready, not just while pods are written.
  const bool scaling = resizing || p.surplus_present ||
                       (IsTrue(st, cond::kScaling) && !restarting && st.ready_replicas != desired);
  if (!p.being_replaced.empty())
    SetCondition(st, cond::kRestarting, true, "WorkerFailed",
                 to_string(p.being_replaced.size()) + " worker(s) failed and are being replaced",
                 p.now);
  else if (!restarting)
    SetCondition(st, cond::kRestarting, false, "WorkersReady", "no worker is being replaced",
                 p.now);
  const std::string scaling_message =
      "scaling workers from " + to_string(st.replicas) + " to " + to_string(desired);
  if (scaling && !IsTrue(st, cond::kScaling))
    p.plan.events.push_back({"Normal", "Scaling", scaling_message});
  if (scaling)
    SetCondition(st, cond::kScaling, true, "ReplicasChanged", scaling_message, p.now);
  else
    SetCondition(st, cond::kScaling, false, "ReplicasReached",
                 to_string(desired) + " worker(s) present", p.now);
  int unschedulable = 0;
  std::string why;
  for (const auto& pod : p.pods) {
    if (pod.deleting || pod.phase != "Pending" || pod.unschedulable.empty()) continue;
    if (unschedulable++ == 0) why = pod.name + ": " + pod.unschedulable;
  }
  if (unschedulable > 0) {
    const std::string message = to_string(unschedulable) + " worker(s) cannot be scheduled (" +
                                why + "); training runs with " + to_string(st.ready_replicas) +
                                " ready (min " + to_string(p.spec.min_replicas) + ", desired " +
                                to_string(desired) + ")";
    if (!IsTrue(st, cond::kUnschedulable))
      p.plan.events.push_back({"Warning", "WorkersUnschedulable", message});
    SetCondition(st, cond::kUnschedulable, true, "WorkersUnschedulable", message, p.now);
  } else {
    SetCondition(st, cond::kUnschedulable, false, "WorkersScheduled", "every worker is scheduled",
                 p.now);
  }
  const bool running = st.ready_replicas >= p.spec.min_replicas;
  if (running && !IsTrue(st, cond::kRunning))
    p.plan.events.push_back(
        {"Normal", "Running", to_string(st.ready_replicas) + " worker(s) ready"});
  SetCondition(st, cond::kRunning, running, running ? "WorkersReady" : "WorkersNotReady",
               to_string(st.ready_replicas) + " of " + to_string(desired) +
                   " worker(s) ready (min " + to_string(p.spec.min_replicas) + ")",
               p.now);
  // A job that ran and lost workers below minReplicas (a pod deleted or
  // evicted rather than failed) is restarting, not newly created.
  const JobPhase before = p.job.status.phase;
  const bool started = before == JobPhase::kRunning || before == JobPhase::kScaling ||
                       before == JobPhase::kRestarting;
  st.phase = restarting ? JobPhase::kRestarting
             : scaling  ? (running || !started ? JobPhase::kScaling : JobPhase::kRestarting)
             : running  ? JobPhase::kRunning
             : started  ? JobPhase::kRestarting
                        : JobPhase::kCreated;
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

JobPlan PlanJob(const PlanInput& input) {
  Planner p(input);
  Observe(p);
  for (Phase phase : {PlanFinished, PlanInvalidSpec, PlanSuspend, PlanDeadline, PlanLostNodes,
                      PlanCompletion, PlanFailures})
    if (phase(p)) return std::move(p.plan);
  PlanScaling(p);
  PlanConditions(p);
  return std::move(p.plan);
}

}  // namespace khorovod::op
