// PlanJob's GPU rules: GPU counts in status, workers that cannot be
// scheduled, and node avoidance after a GPU failure (the reserved exit code,
// or a device the kubelet reports Unhealthy) with its cooldown.
#include <gtest/gtest.h>

#include <algorithm>

#include "controller/builders.h"
#include "controller/job_plan.h"
#include "kube/leader_election.h"

namespace khorovod::op {
namespace {

using Clock = std::chrono::system_clock;

class GpuPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<FieldError> errors;
    job_ = DecodeHorovodJob(Json::parse(R"({
      "metadata": {"name": "g", "namespace": "ns", "uid": "u", "generation": 1},
      "spec": {"replicas": 2, "minReplicas": 1, "maxReplicas": 2,
               "runPolicy": {"backoffLimit": 3, "restartPolicy": "ExitCode"},
               "schedulingPolicy": {"nodeCooldownSeconds": 60},
               "worker": {"template": {"spec": {"containers": [{"name": "c", "image": "i",
                 "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}}}})"),
                            errors);
    ASSERT_TRUE(errors.empty()) << JoinErrors(errors);
    now_ = Clock::now();
  }

  Json Pod(int index, const std::string& phase, const std::string& node, bool ready = false) {
    Json pod = BuildWorkerPod(job_, index);
    pod["metadata"]["uid"] = "pod-" + std::to_string(index) + "-" + std::to_string(incarnation_++);
    pod["status"] = {{"phase", phase}};
    if (!node.empty()) pod["spec"]["nodeName"] = node;
    if (ready) pod["status"]["conditions"] = Json::array({{{"type", "Ready"}, {"status", "True"}}});
    return pod;
  }
  static Json Exited(Json pod, int code) {
    pod["status"]["phase"] = "Failed";
    pod["status"]["containerStatuses"] =
        Json::array({{{"name", "c"}, {"state", {{"terminated", {{"exitCode", code}}}}}}});
    return pod;
  }
  static Json WithUnhealthyGpu(Json pod, const std::string& id) {
    pod["status"]["containerStatuses"] = Json::array(
        {{{"name", "c"},
          {"state", {{"running", Json::object()}}},
          {"allocatedResourcesStatus",
           Json::array(
               {{{"name", "nvidia.com/gpu"},
                 {"resources", Json::array({{{"resourceID", id}, {"health", "Unhealthy"}}})}}})}}});
    return pod;
  }
  JobPlan Plan(std::vector<Json> workers) {
    PlanInput in;
    in.job = &job_;
    in.workers = std::move(workers);
    in.now = now_;
    in.spec_errors = Validate(job_);
    return PlanJob(in);
  }
  static const Condition* Find(const HorovodJobStatus& s, const std::string& type) {
    for (const auto& c : s.conditions)
      if (c.type == type) return &c;
    return nullptr;
  }
  static bool HasEvent(const JobPlan& plan, const std::string& reason) {
    return std::any_of(plan.events.begin(), plan.events.end(),
                       [&](const PlannedEvent& e) { return e.reason == reason; });
  }

  HorovodJob job_;
  Clock::time_point now_;
  int incarnation_ = 0;
};

TEST_F(GpuPlanTest, StatusCountsGpusHeldAgainstGpusWanted) {
  JobPlan plan = Plan({Pod(0, "Running", "n1", true), Pod(1, "Pending", "")});
  EXPECT_EQ(plan.status.gpus, 2) << "only the scheduled worker holds GPUs";
  EXPECT_EQ(plan.status.gpus_wanted, 4);
  job_.spec.replicas = 1;
  EXPECT_EQ(Plan({Pod(0, "Running", "n1", true)}).status.gpus_wanted, 2);
}

TEST_F(GpuPlanTest, UnschedulableWorkersSayWhyInACondition) {
  Json waiting = Pod(1, "Pending", "");
  waiting["status"]["conditions"] =
      Json::array({{{"type", "PodScheduled"},
                    {"status", "False"},
                    {"message", "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}}});
  JobPlan plan = Plan({Pod(0, "Running", "n1", true), waiting});
  const Condition* c = Find(plan.status, "Unschedulable");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status, "True");
  EXPECT_EQ(c->message,
            "1 worker(s) cannot be scheduled (g-worker-1: 0/1 nodes are available: 1 Insufficient "
            "nvidia.com/gpu.); "
            "training runs with 1 ready (min 1, desired 2)");
  EXPECT_TRUE(HasEvent(plan, "WorkersUnschedulable"));
  EXPECT_EQ(plan.status.phase, JobPhase::kRunning) << "it trains with what fits";
  job_.status = plan.status;
  JobPlan later = Plan({Pod(0, "Running", "n1", true), Pod(1, "Running", "n1", true)});
  EXPECT_EQ(Find(later.status, "Unschedulable")->status, "False");
}

TEST_F(GpuPlanTest, TheGpuErrorExitCodeIsRetriedAndItsNodeAvoided) {
  JobPlan plan =
      Plan({Pod(0, "Running", "n1", true), Exited(Pod(1, "Running", "n2"), kGpuErrorExitCode)});
  EXPECT_NE(plan.status.phase, JobPhase::kFailed)
      << "restartPolicy ExitCode retries a GPU failure (exit 121)";
  EXPECT_EQ(plan.status.restart_count, 1);
  ASSERT_EQ(plan.delete_pods.size(), 1u);
  EXPECT_EQ(plan.delete_pods[0].name, "g-worker-1");
  ASSERT_EQ(plan.status.avoided_nodes.size(), 1u);
  EXPECT_EQ(plan.status.avoided_nodes[0].node, "n2");
  EXPECT_EQ(plan.status.avoided_nodes[0].until, FormatTime(now_ + std::chrono::seconds(60)));
  EXPECT_TRUE(HasEvent(plan, "NodeAvoided"));
  EXPECT_EQ(plan.avoid_nodes, std::vector<std::string>{"n2"});
  ASSERT_TRUE(plan.requeue_after);
  EXPECT_LE(*plan.requeue_after, std::chrono::seconds(62));
}

TEST_F(GpuPlanTest, OtherProgramErrorsStillFailAnExitCodeJob) {
  JobPlan plan = Plan({Pod(0, "Running", "n1", true), Exited(Pod(1, "Running", "n2"), 3)});
  EXPECT_EQ(plan.status.phase, JobPhase::kFailed);
  EXPECT_TRUE(plan.status.avoided_nodes.empty());
}

TEST_F(GpuPlanTest, ARunningWorkerOnAnUnhealthyGpuIsReplaced) {
  JobPlan plan = Plan({Pod(0, "Running", "n1", true),
                       WithUnhealthyGpu(Pod(1, "Running", "n1", true), "GPU-sim-3")});
  ASSERT_EQ(plan.delete_pods.size(), 1u);
  EXPECT_EQ(plan.delete_pods[0].name, "g-worker-1");
  EXPECT_EQ(plan.delete_pods[0].reason, "worker failed (GPU GPU-sim-3 Unhealthy)");
  EXPECT_EQ(plan.status.restart_count, 1);
  ASSERT_EQ(plan.status.avoided_nodes.size(), 1u);
  EXPECT_EQ(plan.status.avoided_nodes[0].node, "n1");
  EXPECT_EQ(plan.status.avoided_nodes[0].reason,
            "GPU failure of g-worker-1 (GPU GPU-sim-3 Unhealthy)");
  // Seen again (still terminating is skipped; still present undeleted is not counted twice).
  job_.status = plan.status;
  Json again = WithUnhealthyGpu(Pod(1, "Running", "n1", true), "GPU-sim-3");
  again["metadata"]["uid"] = plan.status.counted_failures.back();
  JobPlan second = Plan({Pod(0, "Running", "n1", true), again});
  EXPECT_EQ(second.status.restart_count, 1);
  EXPECT_FALSE(HasEvent(second, "NodeAvoided")) << "one failure, one event";
}

TEST_F(GpuPlanTest, NoCooldownNoAvoidance) {
  job_.spec.scheduling.node_cooldown_seconds = 0;
  JobPlan plan = Plan({Exited(Pod(0, "Running", "n1"), kGpuErrorExitCode)});
  EXPECT_TRUE(plan.status.avoided_nodes.empty());
  EXPECT_EQ(plan.delete_pods.size(), 1u);
}

TEST_F(GpuPlanTest, AnExpiredAvoidanceEndsAndFreesAWaitingWorker) {
  job_.status.avoided_nodes = {{"n1", FormatTime(now_ - std::chrono::seconds(1)), "GPU failure"},
                               {"n2", FormatTime(now_ + std::chrono::seconds(30)), "GPU failure"}};
  Json waiting = BuildWorkerPod(job_, 1, {"n1", "n2"});
  waiting["metadata"]["uid"] = "w1";
  waiting["status"] = {{"phase", "Pending"}};
  Json stuck_elsewhere = BuildWorkerPod(job_, 0, {"n2"});
  stuck_elsewhere["metadata"]["uid"] = "w0";
  stuck_elsewhere["status"] = {{"phase", "Pending"}};
  JobPlan plan = Plan({stuck_elsewhere, waiting});
  ASSERT_EQ(plan.status.avoided_nodes.size(), 1u);
  EXPECT_EQ(plan.status.avoided_nodes[0].node, "n2");
  EXPECT_EQ(plan.avoid_nodes, std::vector<std::string>{"n2"});
  ASSERT_EQ(plan.delete_pods.size(), 1u)
      << "only the pod that avoids the expired node is re-created";
  EXPECT_EQ(plan.delete_pods[0].name, "g-worker-1");
  EXPECT_EQ(plan.delete_pods[0].reason, "node n1 is no longer avoided");
}

TEST_F(GpuPlanTest, WorkersNeverScheduledDoNotHoldACompletedJob) {
  Json done = Pod(0, "Succeeded", "n1");
  done["status"]["containerStatuses"] =
      Json::array({{{"name", "c"}, {"state", {{"terminated", {{"exitCode", 0}}}}}}});
  JobPlan plan = Plan({done, Pod(1, "Pending", "")});
  EXPECT_EQ(plan.status.phase, JobPhase::kSucceeded);
  ASSERT_EQ(plan.delete_pods.size(), 1u);
  EXPECT_EQ(plan.delete_pods[0].name, "g-worker-1");
  EXPECT_TRUE(plan.create_workers.empty());
  // A scheduled one may still start: it is waited for.
  JobPlan waiting = Plan({done, Pod(1, "Pending", "n1")});
  EXPECT_NE(waiting.status.phase, JobPhase::kSucceeded);
}

}  // namespace
}  // namespace khorovod::op
