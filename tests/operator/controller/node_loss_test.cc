// Lost nodes (job_plan.h phase 5, controller/node_health.h): a worker bound
// to a NotReady/Unknown or unreachable node is force-deleted after
// runPolicy.nodeLossTimeoutSeconds and replaced off that node.
#include <gtest/gtest.h>

#include <algorithm>

#include "controller/builders.h"
#include "controller/job_plan.h"
#include "controller/node_health.h"

namespace khorovod::op {
namespace {

using Clock = std::chrono::system_clock;
using std::chrono::seconds;

Json NodeJson(const std::string& ready, const std::string& since,
              const Json& taints = Json::array()) {
  return {{"metadata", {{"name", "n1"}, {"labels", {{"a", "b"}}}}},
          {"spec", {{"taints", taints}, {"podCIDR", "10.0.0.0/24"}}},
          {"status",
           {{"conditions", Json::array({{{"type", "MemoryPressure"}, {"status", "False"}},
                                        {{"type", "Ready"},
                                         {"status", ready},
                                         {"reason", "NodeStatusUnknown"},
                                         {"lastTransitionTime", since}}})},
            {"images", Json::array({"big"})}}}};
}

TEST(NodeHealth, ReadyNotTrueOrTheTaintsMeanLostSinceTheEarliestMark) {
  NodeHealth ok = NodeHealthOf(NodeJson("True", "2026-11-27T10:00:00Z"));
  EXPECT_FALSE(ok.lost);
  EXPECT_FALSE(ok.since);
  NodeHealth unknown = NodeHealthOf(NodeJson("Unknown", "2026-11-27T10:00:00Z"));
  EXPECT_TRUE(unknown.lost);
  EXPECT_EQ(unknown.why, "Ready=Unknown (NodeStatusUnknown)");
  ASSERT_TRUE(unknown.since);
  EXPECT_EQ(FormatTime(*unknown.since), "2026-11-27T10:00:00Z");
  // A taint added before the condition's transition moves "since" earlier;
  // a taint alone (Ready still True) is enough.
  Json taint = Json::array({{{"key", kTaintUnreachable},
                             {"effect", "NoExecute"},
                             {"timeAdded", "2026-11-27T09:59:00Z"}}});
  NodeHealth both = NodeHealthOf(NodeJson("Unknown", "2026-11-27T10:00:00Z", taint));
  EXPECT_EQ(FormatTime(*both.since), "2026-11-27T09:59:00Z");
  NodeHealth tainted = NodeHealthOf(NodeJson("True", "2026-11-27T10:00:00Z", taint));
  EXPECT_TRUE(tainted.lost);
  EXPECT_EQ(tainted.why, std::string("taint ") + kTaintUnreachable);
  Json other = Json::array({{{"key", "example.com/gpu"}, {"effect", "NoSchedule"}}});
  EXPECT_FALSE(NodeHealthOf(NodeJson("True", "2026-11-27T10:00:00Z", other)).lost);
  // Without any timestamp the time is unknown: lost, but never "due".
  EXPECT_FALSE(NodeHealthOf(NodeJson("False", "")).since);
  EXPECT_FALSE(NodeHealthOf(Json::object()).lost) << "garbage is not a lost node";
}

TEST(NodeHealth, TheCacheKeepsOnlyWhatTheHealthIsReadFrom) {
  Json taints = Json::array(
      {{{"key", kTaintNotReady}, {"effect", "NoSchedule"}, {"timeAdded", "2026-11-27T09:59:00Z"}},
       {{"key", "other"}, {"effect", "NoSchedule"}}});
  Json node = NodeJson("False", "2026-11-27T10:00:00Z", taints);
  Json cached = CachedNode(node);
  EXPECT_FALSE(cached["metadata"].contains("labels"));
  EXPECT_FALSE(cached["status"].contains("images"));
  EXPECT_EQ(cached["status"]["conditions"].size(), 1u);
  EXPECT_EQ(cached["spec"]["taints"].size(), 1u);
  NodeHealth a = NodeHealthOf(node), b = NodeHealthOf(cached);
  EXPECT_EQ(a.lost, b.lost);
  EXPECT_EQ(a.why, b.why);
  EXPECT_EQ(*a.since, *b.since);
}

class NodeLossPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<FieldError> errors;
    job_ = DecodeHorovodJob(Json::parse(R"({
      "metadata": {"name": "j", "namespace": "ns", "uid": "u", "generation": 1},
      "spec": {"replicas": 3, "minReplicas": 2, "maxReplicas": 3,
               "worker": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}})"),
                            errors);
    EXPECT_TRUE(errors.empty());
    job_.status.phase = JobPhase::kRunning;
    now_ = Clock::now();
  }
  Json Pod(int index, const std::string& node, bool terminating = false) {
    Json pod = index >= 0 ? BuildWorkerPod(job_, index) : BuildRendezvousPod(job_);
    pod["metadata"]["uid"] = "uid-" + std::to_string(index);
    if (terminating) pod["metadata"]["deletionTimestamp"] = FormatTime(now_ - seconds(100));
    pod["spec"]["nodeName"] = node;
    pod["status"] = {{"phase", "Running"},
                     {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})}};
    return pod;
  }
  NodeHealth Lost(int seconds_ago) {
    return {true, now_ - seconds(seconds_ago), "Ready=Unknown (NodeStatusUnknown)"};
  }
  JobPlan Plan(std::vector<Json> workers, std::map<std::string, NodeHealth> nodes,
               std::optional<Json> rdzv = {}) {
    PlanInput in;
    in.job = &job_;
    in.workers = std::move(workers);
    in.rendezvous = std::move(rdzv);
    in.nodes = std::move(nodes);
    in.now = now_;
    return PlanJob(in);
  }
  // The plan waits for the bound: nothing deleted, looked at again in `wait`,
  // and the NodeLost condition says what will happen (`says`).
  static void ExpectWaiting(const JobPlan& plan, seconds wait, const std::string& says) {
    EXPECT_TRUE(plan.delete_pods.empty());
    ASSERT_TRUE(plan.requeue_after);
    EXPECT_EQ(*plan.requeue_after, wait) << "looked at again when the bound expires";
    const Condition* c = Find(plan.status, "NodeLost");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->status, "True");
    EXPECT_NE(c->message.find(says), std::string::npos) << c->message;
  }
  static const Condition* Find(const HorovodJobStatus& s, const std::string& type) {
    for (const auto& c : s.conditions)
      if (c.type == type) return &c;
    return nullptr;
  }
  HorovodJob job_;
  Clock::time_point now_;
};

TEST_F(NodeLossPlanTest, TheDefaultBoundIs30Seconds) {
  EXPECT_EQ(job_.spec.run_policy.node_loss_timeout_seconds, 30);
}

TEST_F(NodeLossPlanTest, BeforeTheBoundTheJobWaitsAndSaysWhen) {
  JobPlan plan =
      Plan({Pod(0, "n0"), Pod(1, "n1"), Pod(2, "n2")}, {{"n0", {}}, {"n1", Lost(10)}, {"n2", {}}});
  ExpectWaiting(plan, seconds(20), "node n1 lost (Ready=Unknown (NodeStatusUnknown))");
  ExpectWaiting(plan, seconds(20), "j-worker-1 will be force-deleted and replaced at");
  EXPECT_EQ(std::count_if(plan.events.begin(), plan.events.end(),
                          [](const PlannedEvent& e) { return e.reason == "NodeLost"; }),
            1);
  EXPECT_EQ(plan.status.restart_count, 0);
}

TEST_F(NodeLossPlanTest, AfterTheBoundItsWorkersAreForceDeletedAndTheNodeAvoided) {
  // Worker 2 is already Terminating (the taint eviction or a scale-down asked
  // for it), which a dead kubelet never confirms: it is force-deleted too.
  JobPlan plan = Plan({Pod(0, "n0"), Pod(1, "n1"), Pod(2, "n1", /*terminating=*/true)},
                      {{"n0", {}}, {"n1", Lost(31)}}, Pod(-1, "n1"));
  ASSERT_EQ(plan.delete_pods.size(), 3u);
  for (const PodDeletion& d : plan.delete_pods) {
    EXPECT_TRUE(d.force) << d.name;
    EXPECT_EQ(d.reason, "node n1 lost") << d.name;
  }
  EXPECT_EQ(plan.delete_pods.back().name, RendezvousName(job_))
      << "the rendezvous pod of a lost node is re-created too";
  EXPECT_EQ(plan.status.restart_count, 0) << "a lost node is not the program's failure";
  ASSERT_EQ(plan.status.avoided_nodes.size(), 1u);
  EXPECT_EQ(plan.status.avoided_nodes[0].node, "n1");
  EXPECT_EQ(plan.avoid_nodes, (std::vector<std::string>{"n1"}));
  EXPECT_EQ(plan.status.phase, JobPhase::kRestarting);
  bool event = std::any_of(plan.events.begin(), plan.events.end(), [](const PlannedEvent& e) {
    return e.reason == "NodeLost" &&
           e.message.find("force-deleting j-worker-2, j-worker-1, j-rendezvous") !=
               std::string::npos;
  });
  EXPECT_TRUE(event);
  // The pods gone, the missing indices are re-created away from n1.
  job_.status = plan.status;
  JobPlan next = Plan({Pod(0, "n0")}, {{"n0", {}}});
  EXPECT_EQ(next.create_workers, (std::vector<int>{1, 2}));
  EXPECT_EQ(next.avoid_nodes, (std::vector<std::string>{"n1"}));
  Json replacement = BuildWorkerPod(job_, 1, next.avoid_nodes);
  EXPECT_NE(replacement.dump().find(R"("operator":"NotIn","values":["n1"])"), std::string::npos);
  const Condition* c = Find(next.status, "NodeLost");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status, "False");
}

TEST_F(NodeLossPlanTest, ZeroMeansAtOnceAndAHealthyOrUnknownTimeNodeIsLeftAlone) {
  job_.spec.run_policy.node_loss_timeout_seconds = 0;
  JobPlan now = Plan({Pod(0, "n1")}, {{"n1", Lost(0)}});
  ASSERT_EQ(now.delete_pods.size(), 1u);
  EXPECT_TRUE(now.delete_pods[0].force);
  NodeHealth no_time{true, std::nullopt, "Ready=False"};
  JobPlan untimed = Plan({Pod(0, "n1"), Pod(1, "n2")}, {{"n1", no_time}, {"n2", {}}});
  EXPECT_TRUE(untimed.delete_pods.empty()) << "without a time the taint eviction decides";
  EXPECT_EQ(Find(untimed.status, "NodeLost"), nullptr)
      << "no condition on jobs that never lost a node";
  JobPlan unwatched = Plan({Pod(0, "n1")}, {});
  EXPECT_TRUE(unwatched.delete_pods.empty());
}

TEST_F(NodeLossPlanTest, AFailedWorkerOnALostNodeIsCountedOnceAndForceDeleted) {
  Json failed = Pod(0, "n1");
  failed["status"] = {
      {"phase", "Failed"},
      {"containerStatuses",
       Json::array({{{"name", "c"}, {"state", {{"terminated", {{"exitCode", 137}}}}}}})}};
  JobPlan plan = Plan({failed, Pod(1, "n0")}, {{"n1", Lost(60)}, {"n0", {}}});
  ASSERT_EQ(plan.delete_pods.size(), 1u);
  EXPECT_TRUE(plan.delete_pods[0].force);
  EXPECT_EQ(plan.delete_pods[0].reason, "worker failed (exit code 137)");
  EXPECT_EQ(plan.status.restart_count, 1);
}

// The survivors finished training while a worker sat on a crashed node: the
// job must not wait for a kubelet that will never report that worker done
// (on the real cluster the job stayed Completing, with no NodeLost, until the
// 5-minute taint eviction).
TEST_F(NodeLossPlanTest, FinishedSurvivorsWaitForALostNodesWorkerOnlyUntilTheBound) {
  auto done = [&](int index, const std::string& node) {
    Json pod = Pod(index, node);
    pod["status"] = {
        {"phase", "Succeeded"},
        {"containerStatuses",
         Json::array({{{"name", "c"}, {"state", {{"terminated", {{"exitCode", 0}}}}}}})}};
    return pod;
  };
  std::vector<Json> pods = {done(0, "n0"), done(1, "n2"), Pod(2, "n1")};
  JobPlan before = Plan(pods, {{"n0", {}}, {"n1", Lost(4)}, {"n2", {}}});
  EXPECT_EQ(before.status.phase, JobPhase::kRunning) << "still completing";
  ExpectWaiting(before, seconds(26), "j-worker-2 will be force-deleted at");

  job_.status = before.status;
  JobPlan after = Plan(pods, {{"n0", {}}, {"n1", Lost(31)}, {"n2", {}}});
  ASSERT_EQ(after.delete_pods.size(), 1u);
  EXPECT_EQ(after.delete_pods[0].name, "j-worker-2");
  EXPECT_TRUE(after.delete_pods[0].force);
  EXPECT_EQ(after.status.phase, JobPhase::kSucceeded);
  EXPECT_TRUE(after.create_workers.empty()) << "training is over: nothing replaced";
  EXPECT_TRUE(after.status.avoided_nodes.empty());
  EXPECT_TRUE(std::any_of(after.events.begin(), after.events.end(), [](const PlannedEvent& e) {
    return e.reason == "NodeLost" &&
           e.message.find("force-deleting j-worker-2 (training is over: not replaced)") !=
               std::string::npos;
  }));
  // A finished worker on a lost node holds nothing: it is left alone.
  JobPlan finished_there = Plan({done(0, "n1"), Pod(1, "n0")}, {{"n0", {}}, {"n1", Lost(60)}});
  EXPECT_TRUE(finished_there.delete_pods.empty());
  EXPECT_EQ(finished_there.status.phase, JobPhase::kRunning);
}

TEST_F(NodeLossPlanTest, AnEvictedOrPreemptedWorkerIsReplacedWithoutCountingAFailure) {
  job_.spec.run_policy.restart_policy = RestartPolicy::kNever;
  Json evicted = Pod(1, "n0");
  evicted["status"] = {
      {"phase", "Failed"},
      {"conditions", Json::array({{{"type", "DisruptionTarget"},
                                   {"status", "True"},
                                   {"reason", "EvictionByEvictionAPI"}}})},
      {"containerStatuses",
       Json::array({{{"name", "c"}, {"state", {{"terminated", {{"exitCode", 143}}}}}}})}};
  Json pressured = Pod(2, "n0");
  pressured["status"] = {{"phase", "Failed"}, {"reason", "Evicted"}};
  JobPlan plan = Plan({Pod(0, "n0"), evicted, pressured}, {{"n0", {}}});
  EXPECT_NE(plan.status.phase, JobPhase::kFailed)
      << "restartPolicy Never is about the program's failures";
  EXPECT_EQ(plan.status.restart_count, 0);
  ASSERT_EQ(plan.delete_pods.size(), 2u);
  EXPECT_EQ(plan.delete_pods[0].reason, "worker disrupted (exit code -1)");
  EXPECT_EQ(plan.delete_pods[1].reason, "worker disrupted (exit code 143)");
  EXPECT_TRUE(std::any_of(plan.events.begin(), plan.events.end(),
                          [](const PlannedEvent& e) { return e.reason == "WorkerDisrupted"; }));
}

TEST(DisruptionBudget, KeepsTheWorkersAtMinReplicas) {
  std::vector<FieldError> errors;
  HorovodJob job =
      DecodeHorovodJob(Json::parse(R"({"metadata": {"name": "j", "namespace": "ns", "uid": "u"},
    "spec": {"replicas": 4, "minReplicas": 3, "maxReplicas": 6,
             "worker": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}})"),
                       errors);
  Json pdb = BuildDisruptionBudget(job);
  EXPECT_EQ(pdb["apiVersion"], "policy/v1");
  EXPECT_EQ(pdb["metadata"]["name"], "j");
  EXPECT_EQ(pdb["metadata"]["ownerReferences"][0]["uid"], "u");
  EXPECT_EQ(pdb["spec"]["minAvailable"], 3);
  EXPECT_EQ(pdb["spec"]["selector"]["matchLabels"],
            Json({{"khorovod.dev/job-name", "j"}, {"khorovod.dev/role", "worker"}}));
  EXPECT_EQ(pdb["spec"]["unhealthyPodEvictionPolicy"], "AlwaysAllow");
}

}  // namespace
}  // namespace khorovod::op
