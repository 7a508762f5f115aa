// PlanJob's rules, one scenario each, with no API server involved.
#include "controller/job_plan.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "controller/builders.h"

namespace khorovod::op {
namespace {

using Clock = std::chrono::system_clock;

class JobPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<FieldError> errors;
    job_ = DecodeHorovodJob(Json::parse(R"({
      "metadata": {"name": "j", "namespace": "ns", "uid": "u", "generation": 2},
      "spec": {"replicas": 4, "minReplicas": 2, "maxReplicas": 6, "runPolicy": {"backoffLimit": 2},
               "worker": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}})"),
                            errors);
    now_ = Clock::now();
  }

  Json Pod(int index, const std::string& phase, bool ready = false, int exit_code = -1) {
    Json pod = BuildWorkerPod(job_, index);
    pod["metadata"]["uid"] = "pod-" + std::to_string(index) + "-" + std::to_string(incarnation_++);
    pod["status"] = {{"phase", phase}};
    if (ready) pod["status"]["conditions"] = Json::array({{{"type", "Ready"}, {"status", "True"}}});
    if (exit_code >= 0)
      pod["status"]["containerStatuses"] =
          Json::array({{{"name", "c"}, {"state", {{"terminated", {{"exitCode", exit_code}}}}}}});
    return pod;
  }

  // As the reconciler plans: validation first, then PlanJob.
  JobPlan Plan(std::vector<Json> workers) {
    PlanInput in;
    in.job = &job_;
    in.workers = std::move(workers);
    in.now = now_;
    in.spec_errors = Validate(job_);
    return PlanJob(in);
  }

  static bool HasCondition(const HorovodJobStatus& s, const std::string& type,
                           const std::string& status) {
    return std::any_of(s.conditions.begin(), s.conditions.end(),
                       [&](const Condition& c) { return c.type == type && c.status == status; });
  }

  HorovodJob job_;
  Clock::time_point now_;
  int incarnation_ = 0;
};

TEST_F(JobPlanTest, NewJobCreatesEveryWorker) {
  JobPlan plan = Plan({});
  EXPECT_EQ(plan.create_workers, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(plan.delete_pods.empty());
  EXPECT_TRUE(plan.ensure_rendezvous);
  EXPECT_EQ(plan.status.phase, JobPhase::kCreated);
  EXPECT_TRUE(HasCondition(plan.status, "Created", "True"));
  EXPECT_EQ(plan.status.observed_generation, 2);
  EXPECT_FALSE(plan.status.start_time.empty());
  EXPECT_EQ(plan.status.selector, WorkerSelector(job_));
}

TEST_F(JobPlanTest, RunningAndReadyWorkersMakeTheJobRunning) {
  JobPlan plan = Plan({Pod(0, "Running", true), Pod(1, "Running", true), Pod(2, "Running", false),
                       Pod(3, "Pending")});
  EXPECT_TRUE(plan.create_workers.empty());
  EXPECT_EQ(plan.status.replicas, 4);
  EXPECT_EQ(plan.status.ready_replicas, 2) << "only Running+Ready pods count";
  EXPECT_EQ(plan.status.active, 4);
  EXPECT_EQ(plan.status.phase, JobPhase::kRunning) << "ready >= minReplicas";
  EXPECT_TRUE(HasCondition(plan.status, "Running", "True"));
}

TEST_F(JobPlanTest, ARunningJobThatLostWorkersBelowMinIsRestartingNotCreated) {
  job_.status.phase = JobPhase::kRunning;  // two pods were deleted (not failed) under a running job
  JobPlan plan = Plan({Pod(0, "Running", true), Pod(1, "Pending")});
  EXPECT_EQ(plan.create_workers, (std::vector<int>{2, 3}));
  EXPECT_EQ(plan.status.phase, JobPhase::kRestarting);
}

TEST_F(JobPlanTest, EachFailureOfOneIndexIsItsOwnEvent) {
  job_.status.restart_count = 1;
  JobPlan plan = Plan({Pod(0, "Running", true), Pod(1, "Failed", false, 137),
                       Pod(2, "Running", true), Pod(3, "Running", true)});
  ASSERT_FALSE(plan.events.empty());
  EXPECT_NE(plan.events[0].message.find("restart 2 of 2 allowed"), std::string::npos)
      << plan.events[0].message;
}

TEST_F(JobPlanTest, TerminatingPodsAreNotCountedAndHoldTheirName) {
  Json dying = Pod(1, "Running", true);
  dying["metadata"]["deletionTimestamp"] = "2026-11-22T00:00:00Z";
  JobPlan plan =
      Plan({Pod(0, "Running", true), dying, Pod(2, "Running", true), Pod(3, "Running", true)});
  EXPECT_EQ(plan.status.ready_replicas, 3);
  EXPECT_TRUE(plan.create_workers.empty()) << "index 1 is re-created only once its old pod is gone";
}

TEST_F(JobPlanTest, FailedWorkerIsReplacedWithinBackoff) {
  JobPlan plan = Plan({Pod(0, "Running", true), Pod(1, "Failed", false, 137),
                       Pod(2, "Running", true), Pod(3, "Running", true)});
  ASSERT_EQ(plan.delete_pods.size(), 1u);
  EXPECT_EQ(plan.delete_pods[0].name, "j-worker-1");
  EXPECT_FALSE(plan.delete_pods[0].uid.empty())
      << "deletes are preconditioned on the failed incarnation";
  EXPECT_EQ(plan.status.restart_count, 1);
  EXPECT_EQ(plan.status.phase, JobPhase::kRestarting);
  EXPECT_TRUE(HasCondition(plan.status, "Restarting", "True"));
  EXPECT_EQ(plan.counted_failures.size(), 1u);
  ASSERT_FALSE(plan.events.empty());
  EXPECT_EQ(plan.events[0].reason, "WorkerFailed");
}

TEST_F(JobPlanTest, AFailureIsCountedOnce) {
  Json failed = Pod(1, "Failed", false, 1);
  JobPlan first = Plan({failed});
  EXPECT_EQ(first.status.counted_failures, first.counted_failures)
      << "the stored status names the counted pod";
  // The status is all that is kept: a plan made by a restarted operator that
  // died before deleting the pod sees the same status and the same pod.
  job_.status = DecodeStatus(EncodeStatus(first.status));
  JobPlan second = Plan({failed});
  EXPECT_EQ(second.status.restart_count, 1) << "counted once across an operator restart";
  EXPECT_TRUE(second.counted_failures.empty()) << "nothing new to record before deleting";
  ASSERT_EQ(second.delete_pods.size(), 1u) << "the pod is still deleted";
  failed["metadata"]["deletionTimestamp"] = "2026-11-22T00:00:00Z";
  EXPECT_EQ(Plan({failed}).status.restart_count, 1)
      << "the cache may still show the pod we deleted";
}

TEST_F(JobPlanTest, ACountedPodIsForgottenOnceGoneAndItsReplacementCountsAgain) {
  JobPlan first = Plan({Pod(1, "Failed", false, 1)});
  job_.status = first.status;
  JobPlan gone = Plan({});
  EXPECT_TRUE(gone.status.counted_failures.empty())
      << "a deleted pod never returns: its UID is dropped";
  EXPECT_EQ(gone.status.restart_count, 1);
  job_.status = gone.status;
  JobPlan again = Plan({Pod(1, "Failed", false, 1)});  // the replacement, a new UID
  EXPECT_EQ(again.status.restart_count, 2);
}

TEST_F(JobPlanTest, BackoffExhaustedFailsTheJob) {
  job_.status.restart_count = 2;  // backoffLimit 2 already used
  JobPlan plan = Plan({Pod(0, "Running", true), Pod(1, "Failed", false, 1)});
  EXPECT_EQ(plan.status.phase, JobPhase::kFailed);
  EXPECT_TRUE(HasCondition(plan.status, "Failed", "True"));
  EXPECT_FALSE(plan.status.completion_time.empty());
  bool reason = false;
  for (const auto& c : plan.status.conditions)
    reason |= c.type == "Failed" && c.reason == "BackoffLimitExceeded";
  EXPECT_TRUE(reason);
  EXPECT_TRUE(plan.create_workers.empty());
  // cleanPodPolicy Running: the running worker goes.
  ASSERT_EQ(plan.delete_pods.size(), 1u);
  EXPECT_EQ(plan.delete_pods[0].name, "j-worker-0");
}

TEST_F(JobPlanTest, ExitCodePolicyRetriesSignalsOnly) {
  job_.spec.run_policy.restart_policy = RestartPolicy::kExitCode;
  JobPlan retried = Plan({Pod(0, "Failed", false, 137)});
  EXPECT_EQ(retried.status.phase, JobPhase::kRestarting);
  JobPlan permanent = Plan({Pod(0, "Failed", false, 2)});
  EXPECT_EQ(permanent.status.phase, JobPhase::kFailed);
  job_.spec.run_policy.restart_policy = RestartPolicy::kNever;
  EXPECT_EQ(Plan({Pod(0, "Failed", false, 137)}).status.phase, JobPhase::kFailed);
}

TEST_F(JobPlanTest, ScaleDownDeletesHighestIndicesFirst) {
  job_.spec.replicas = 2;
  job_.status.conditions.push_back({"Running", "True", "", "", ""});
  JobPlan plan = Plan({Pod(0, "Running", true), Pod(1, "Running", true), Pod(2, "Running", true),
                       Pod(3, "Running", true)});
  ASSERT_EQ(plan.delete_pods.size(), 2u);
  EXPECT_EQ(plan.delete_pods[0].name, "j-worker-3");
  EXPECT_EQ(plan.delete_pods[1].name, "j-worker-2");
  EXPECT_EQ(plan.status.phase, JobPhase::kScaling);
}

TEST_F(JobPlanTest, ScaleUpCreatesMissingIndices) {
  job_.spec.replicas = 6;
  job_.status.conditions.push_back({"Running", "True", "", "", ""});
  JobPlan plan = Plan({Pod(0, "Running", true), Pod(1, "Running", true), Pod(2, "Running", true),
                       Pod(3, "Running", true)});
  EXPECT_EQ(plan.create_workers, (std::vector<int>{4, 5}));
  EXPECT_EQ(plan.status.phase, JobPhase::kScaling);
  EXPECT_TRUE(HasCondition(plan.status, "Scaling", "True"));
  job_.status = plan.status;
  std::vector<Json> six = {Pod(0, "Running", true), Pod(1, "Running", true),
                           Pod(2, "Running", true), Pod(3, "Running", true),
                           Pod(4, "Pending"),       Pod(5, "Pending")};
  EXPECT_EQ(Plan(six).status.phase, JobPhase::kScaling) << "until the new workers are ready";
  six[4] = Pod(4, "Running", true);
  six[5] = Pod(5, "Running", true);
  JobPlan ready = Plan(six);
  EXPECT_EQ(ready.status.phase, JobPhase::kRunning);
  EXPECT_TRUE(HasCondition(ready.status, "Scaling", "False"));
}

TEST_F(JobPlanTest, SuccessWaitsForEveryWorkerThenCleansUp) {
  JobPlan completing = Plan({Pod(0, "Succeeded", false, 0), Pod(1, "Running", true)});
  EXPECT_NE(completing.status.phase, JobPhase::kSucceeded);
  EXPECT_TRUE(completing.create_workers.empty()) << "nothing is created once training ended";
  JobPlan done = Plan({Pod(0, "Succeeded", false, 0), Pod(1, "Succeeded", false, 0),
                       Pod(2, "Succeeded", false, 0), Pod(3, "Succeeded", false, 0)});
  EXPECT_EQ(done.status.phase, JobPhase::kSucceeded);
  EXPECT_TRUE(HasCondition(done.status, "Succeeded", "True"));
  EXPECT_FALSE(done.status.completion_time.empty());
  EXPECT_TRUE(done.delete_pods.empty()) << "cleanPodPolicy Running keeps finished pods";
}

TEST_F(JobPlanTest, TerminalPhasesAreNeverLeft) {
  job_.status.phase = JobPhase::kSucceeded;
  job_.status.completion_time = FormatTime(now_);
  JobPlan plan = Plan({Pod(1, "Failed", false, 1)});
  EXPECT_EQ(plan.status.phase, JobPhase::kSucceeded);
  EXPECT_TRUE(plan.create_workers.empty());
  EXPECT_FALSE(plan.ensure_rendezvous);
}

TEST_F(JobPlanTest, TtlDeletesTheFinishedJobWhenDue) {
  job_.spec.run_policy.ttl_seconds_after_finished = 60;
  job_.status.phase = JobPhase::kSucceeded;
  job_.status.completion_time = FormatTime(now_ - std::chrono::seconds(10));
  JobPlan early = Plan({});
  EXPECT_FALSE(early.delete_job);
  ASSERT_TRUE(early.requeue_after.has_value());
  EXPECT_GE(early.requeue_after->count(), 49);
  EXPECT_LE(early.requeue_after->count(), 51);
  job_.status.completion_time = FormatTime(now_ - std::chrono::seconds(61));
  EXPECT_TRUE(Plan({}).delete_job);
}

TEST_F(JobPlanTest, CleanPodPolicyAllAndNone) {
  job_.status.phase = JobPhase::kFailed;
  job_.spec.run_policy.clean_pod_policy = CleanPodPolicy::kAll;
  EXPECT_EQ(Plan({Pod(0, "Succeeded"), Pod(1, "Running")}).delete_pods.size(), 2u);
  job_.spec.run_policy.clean_pod_policy = CleanPodPolicy::kNone;
  EXPECT_TRUE(Plan({Pod(0, "Succeeded"), Pod(1, "Running")}).delete_pods.empty());
}

TEST_F(JobPlanTest, ActiveDeadlineFailsTheJob) {
  job_.spec.run_policy.active_deadline_seconds = 30;
  job_.status.start_time = FormatTime(now_ - std::chrono::seconds(10));
  JobPlan running = Plan({Pod(0, "Running", true)});
  ASSERT_TRUE(running.requeue_after.has_value()) << "the deadline needs a wake-up";
  job_.status.start_time = FormatTime(now_ - std::chrono::seconds(31));
  JobPlan late = Plan({Pod(0, "Running", true)});
  EXPECT_EQ(late.status.phase, JobPhase::kFailed);
  EXPECT_EQ(late.delete_pods.size(), 1u);
}

TEST_F(JobPlanTest, SuspendDeletesPodsAndResumeRecreates) {
  job_.spec.run_policy.suspend = true;
  JobPlan suspended = Plan({Pod(0, "Running", true), Pod(1, "Pending")});
  EXPECT_EQ(suspended.status.phase, JobPhase::kSuspended);
  EXPECT_EQ(suspended.delete_pods.size(), 2u);
  EXPECT_TRUE(suspended.create_workers.empty());
  EXPECT_TRUE(HasCondition(suspended.status, "Suspended", "True"));
  job_.status = suspended.status;
  job_.spec.run_policy.suspend = false;
  JobPlan resumed = Plan({});
  EXPECT_EQ(resumed.create_workers.size(), 4u);
  EXPECT_TRUE(HasCondition(resumed.status, "Suspended", "False"));
}

TEST_F(JobPlanTest, ANameTooLongForItsPodsFailsWithReason) {
  job_.name = std::string(kMaxJobNameLength + 1, 'a');
  JobPlan plan = Plan({});
  EXPECT_EQ(plan.status.phase, JobPhase::kFailed);
  bool found = false;
  for (const auto& c : plan.status.conditions)
    found |= c.type == "Failed" && c.reason == "InvalidSpec" &&
             c.message.find("metadata.name") != std::string::npos;
  EXPECT_TRUE(found);
  EXPECT_TRUE(plan.create_workers.empty());
  EXPECT_FALSE(plan.ensure_rendezvous) << "no Service or pod is attempted";
}

TEST_F(JobPlanTest, InvalidSpecFailsWithReason) {
  job_.spec.replicas = 9;  // above maxReplicas
  JobPlan plan = Plan({});
  EXPECT_EQ(plan.status.phase, JobPhase::kFailed);
  bool found = false;
  for (const auto& c : plan.status.conditions)
    found |= c.type == "Failed" && c.reason == "InvalidSpec" &&
             c.message.find("spec.replicas") != std::string::npos;
  EXPECT_TRUE(found);
  EXPECT_TRUE(plan.create_workers.empty());
}

TEST_F(JobPlanTest, ConditionTimesMoveOnlyOnTransitions) {
  auto pods = [&] {
    return std::vector<Json>{Pod(0, "Running", true), Pod(1, "Running", true),
                             Pod(2, "Running", true), Pod(3, "Running", true)};
  };
  JobPlan first = Plan(pods());
  job_.status = first.status;
  now_ += std::chrono::seconds(5);
  JobPlan second = Plan(pods());
  EXPECT_EQ(EncodeStatus(first.status), EncodeStatus(second.status))
      << "a steady job writes no new status";
}

}  // namespace
}  // namespace khorovod::op

namespace khorovod::op {
namespace {

TEST_F(JobPlanTest, RendezvousGenerationIsReportedAndKept) {
  PlanInput in;
  in.job = &job_;
  in.now = now_;
  in.rendezvous_generation = 3;
  JobPlan plan = PlanJob(in);
  ASSERT_TRUE(plan.status.rendezvous_generation.has_value());
  EXPECT_EQ(*plan.status.rendezvous_generation, 3);
  job_.status = plan.status;
  in.rendezvous_generation.reset();  // probe failed: keep the last known value
  EXPECT_EQ(*PlanJob(in).status.rendezvous_generation, 3);
}

}  // namespace
}  // namespace khorovod::op
