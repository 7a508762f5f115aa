// Node loss against the real API server (ctest fixture "k8s"): no kubelet
// runs, so the test plays the node lifecycle controller (it marks a Node
// Ready=Unknown) and the scheduler (it binds pods to that node). A pod
// deleted normally on that node stays Terminating, as it does on a cluster
// whose kubelet died: only a forced deletion removes it.
#include <gtest/gtest.h>

#include <ctime>
#include <thread>

#include "test_cluster.h"

namespace khorovod::optest {
namespace {

using namespace std::chrono_literals;

std::string Rfc3339(std::chrono::system_clock::time_point t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

class NodeLossTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = TestCluster::FromEnvironment();
    ASSERT_NE(cluster_, nullptr);
    ns_ = cluster_->CreateNamespace("node-loss");
    node_ = ns_ + "-n1";
  }
  void TearDown() override {
    if (HasFailure() && op_) {
      std::cerr << "---- operator log\n" << op_->Log() << "\n";
      std::string out;
      cluster_->Kubectl({"-n", ns_, "get", "hvdjob,pods,events", "-o", "wide"}, &out);
      std::cerr << out << "\n";
    }
    op_.reset();
    if (!cluster_) return;
    (void)cluster_->admin().Delete("/api/v1/nodes/" + node_);
    (void)cluster_->admin().Delete("/api/v1/namespaces/" + ns_);
  }
  // A Node whose kubelet stopped reporting `ago` before now (or, with
  // `ready`, one that reports fine).
  void CreateLostNode(std::chrono::seconds ago, bool ready = false) {
    Json node = {{"apiVersion", "v1"},
                 {"kind", "Node"},
                 {"metadata", {{"name", node_}}},
                 {"spec", {{"unschedulable", true}}}};
    auto r = cluster_->admin().Post("/api/v1/nodes", node);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    SetNodeReady(ready, ago);
  }
  // What the node lifecycle controller writes: Ready=Unknown since `ago`
  // before now, or Ready=True.
  void SetNodeReady(bool ready, std::chrono::seconds ago = std::chrono::seconds(0)) {
    auto got = cluster_->admin().Get("/api/v1/nodes/" + node_);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    Json n = got.value();
    const std::string since = Rfc3339(std::chrono::system_clock::now() - ago);
    n["status"] = {
        {"conditions", Json::array({{{"type", "Ready"},
                                     {"status", ready ? "True" : "Unknown"},
                                     {"reason", ready ? "KubeletReady" : "NodeStatusUnknown"},
                                     {"message", "set by the test"},
                                     {"lastHeartbeatTime", since},
                                     {"lastTransitionTime", since}}})}};
    auto s = cluster_->admin().Put("/api/v1/nodes/" + node_ + "/status", n);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
  }
  void Bind(const std::string& pod) {
    Json binding = {{"apiVersion", "v1"},
                    {"kind", "Binding"},
                    {"metadata", {{"name", pod}}},
                    {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node_}}}};
    auto r =
        cluster_->admin().Post("/api/v1/namespaces/" + ns_ + "/pods/" + pod + "/binding", binding);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(cluster_->SetPodStatus(ns_, pod, "Running", true));
  }
  // The operator under test, on this namespace (node watching unless
  // `extra` turns it off).
  void StartOperator(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--namespace",      ns_, "--lease-namespace", ns_,
                                  "--resync-seconds", "30"};
    args.insert(args.end(), extra.begin(), extra.end());
    op_ = std::make_unique<OperatorProcess>(*cluster_, args, ns_ + "-op");
  }
  // Job "nl" with `spec` plus a one-container worker template.
  void CreateJob(Json spec) {
    spec["worker"] = {
        {"template", {{"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "i"}}})}}}}}};
    Json job = {{"apiVersion", "khorovod.dev/v1alpha1"},
                {"kind", "HorovodJob"},
                {"metadata", {{"name", "nl"}}},
                {"spec", spec}};
    ASSERT_TRUE(cluster_->admin()
                    .Post("/apis/khorovod.dev/v1alpha1/namespaces/" + ns_ + "/horovodjobs", job)
                    .ok());
  }
  Json Pod(const std::string& name) {
    auto r = cluster_->admin().Get("/api/v1/namespaces/" + ns_ + "/pods/" + name);
    return r.ok() ? r.value() : Json();
  }
  Json Job() {
    auto r =
        cluster_->admin().Get("/apis/khorovod.dev/v1alpha1/namespaces/" + ns_ + "/horovodjobs/nl");
    return r.ok() ? r.value() : Json();
  }
  std::string Condition(const std::string& type) {
    for (const auto& c : Job().value("status", Json::object()).value("conditions", Json::array()))
      if (c.value("type", "") == type) return c.value("status", "") + ": " + c.value("message", "");
    return "";
  }

  std::unique_ptr<TestCluster> cluster_;
  std::unique_ptr<OperatorProcess> op_;
  std::string ns_, node_;
};

TEST_F(NodeLossTest, WorkersOfALostNodeAreForceDeletedAfterTheBoundAndReplacedElsewhere) {
  StartOperator();
  CreateJob({{"replicas", 3},
             {"minReplicas", 2},
             {"maxReplicas", 3},
             {"runPolicy", {{"nodeLossTimeoutSeconds", 4}}}});
  ASSERT_TRUE(WaitFor([&] { return Pod("nl-worker-2").is_object(); }, 30s));
  EXPECT_EQ(Job()["spec"]["runPolicy"]["nodeLossTimeoutSeconds"], 4);

  CreateLostNode(0s);
  const auto lost_at = std::chrono::steady_clock::now();
  Bind("nl-worker-1");
  Bind("nl-worker-2");
  const std::string uid1 = Pod("nl-worker-1")["metadata"]["uid"],
                    uid2 = Pod("nl-worker-2")["metadata"]["uid"];
  // Worker 2 is being deleted the ordinary way (as the taint eviction would):
  // without a kubelet to confirm, it stays Terminating.
  ASSERT_TRUE(cluster_->admin().Delete("/api/v1/namespaces/" + ns_ + "/pods/nl-worker-2").ok());
  EXPECT_TRUE(Pod("nl-worker-2")["metadata"].contains("deletionTimestamp"));

  ASSERT_TRUE(WaitFor([&] { return Condition("NodeLost").rfind("True", 0) == 0; }, 20s))
      << Job().dump();
  EXPECT_NE(Condition("NodeLost").find("node " + node_ + " lost (Ready=Unknown"), std::string::npos)
      << Condition("NodeLost");

  auto replaced = [&](const std::string& name, const std::string& old_uid) {
    Json p = Pod(name);
    return p.is_object() && p["metadata"]["uid"] != old_uid;
  };
  ASSERT_TRUE(
      WaitFor([&] { return replaced("nl-worker-1", uid1) && replaced("nl-worker-2", uid2); }, 30s))
      << Pod("nl-worker-1").dump() << "\n"
      << Pod("nl-worker-2").dump();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - lost_at).count();
  EXPECT_GE(took, 3.0)
      << "not before nodeLossTimeoutSeconds (4 s, whole seconds in the node's timestamps)";
  EXPECT_LT(took, 20.0);
  // The replacements must not land on the lost node.
  Json p = Pod("nl-worker-1");
  EXPECT_NE(p["spec"]["affinity"].dump().find(node_), std::string::npos) << p["spec"].dump();
  EXPECT_EQ(p["metadata"]["annotations"]["khorovod.dev/avoided-nodes"], node_);
  Json status = Job()["status"];
  EXPECT_EQ(status.value("restartCount", 0), 0)
      << "a lost node is not counted against backoffLimit";
  ASSERT_EQ(status["avoidedNodes"].size(), 1u) << status.dump();
  EXPECT_EQ(status["avoidedNodes"][0]["node"], node_);
  std::string events;
  cluster_->Kubectl({"-n", ns_, "get", "events", "--field-selector", "reason=NodeLost", "-o",
                     "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}"},
                    &events);
  EXPECT_NE(events.find("force-deleting"), std::string::npos) << events;
  ASSERT_TRUE(WaitFor([&] { return Condition("NodeLost").rfind("False", 0) == 0; }, 20s))
      << Condition("NodeLost");
}

// The order of the real cluster's run: the workers run, the survivors
// finish training, then the node controller marks the lost node. The job does not wait
// for the lost worker past nodeLossTimeoutSeconds: it is force-deleted, not
// replaced, and the job succeeds.
TEST_F(NodeLossTest, SurvivorsThatFinishedDoNotWaitForALostNodesWorker) {
  StartOperator();
  CreateJob({{"replicas", 3},
             {"minReplicas", 2},
             {"maxReplicas", 3},
             {"runPolicy", {{"nodeLossTimeoutSeconds", 4}, {"cleanPodPolicy", "None"}}}});
  ASSERT_TRUE(WaitFor([&] { return Pod("nl-worker-2").is_object(); }, 30s));
  CreateLostNode(0s, /*ready=*/true);
  // All on one node, so that no worker is unscheduled (deleted once one
  // exited 0); a finished worker on a lost node is left alone.
  for (const char* pod : {"nl-worker-0", "nl-worker-1", "nl-worker-2"}) Bind(pod);
  for (const char* pod : {"nl-worker-0", "nl-worker-1"})
    ASSERT_TRUE(cluster_->SetPodStatus(ns_, pod, "Succeeded", false, 0));
  ASSERT_TRUE(WaitFor(
      [&] { return Condition("Running").find("waiting for the others") != std::string::npos; },
      20s))
      << Job().dump();
  SetNodeReady(false);
  const auto lost_at = std::chrono::steady_clock::now();

  ASSERT_TRUE(WaitFor([&] { return Condition("NodeLost").rfind("True", 0) == 0; }, 20s))
      << Job().dump();
  ASSERT_TRUE(WaitFor([&] { return Job()["status"].value("phase", "") == "Succeeded"; }, 30s))
      << Job().dump();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - lost_at).count();
  EXPECT_GE(took, 3.0)
      << "not before nodeLossTimeoutSeconds (4 s, whole seconds in the node's timestamps)";
  EXPECT_LT(took, 20.0);
  ASSERT_TRUE(WaitFor([&] { return !Pod("nl-worker-2").is_object(); }, 10s))
      << "force-deleted: " << Pod("nl-worker-2").dump();
  std::this_thread::sleep_for(2s);
  EXPECT_FALSE(Pod("nl-worker-2").is_object()) << "training is over: not replaced";
  EXPECT_TRUE(Pod("nl-worker-0").is_object()) << "a finished worker is no lost node's business";
  std::string events;
  cluster_->Kubectl({"-n", ns_, "get", "events", "--field-selector", "reason=NodeLost", "-o",
                     "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}"},
                    &events);
  EXPECT_NE(events.find("force-deleting nl-worker-2 (training is over: not replaced)"),
            std::string::npos)
      << events;
}

TEST_F(NodeLossTest, WithoutNodeWatchingTheOperatorLeavesLostNodesToTheTaintEviction) {
  StartOperator({"--watch-nodes=false"});
  CreateJob({{"replicas", 2}, {"runPolicy", {{"nodeLossTimeoutSeconds", 0}}}});
  ASSERT_TRUE(WaitFor([&] { return Pod("nl-worker-1").is_object(); }, 30s));
  CreateLostNode(120s);
  Bind("nl-worker-1");
  const std::string uid = Pod("nl-worker-1")["metadata"]["uid"];
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(Pod("nl-worker-1")["metadata"]["uid"], uid);
}

// Drains go through the eviction API, which the job's PodDisruptionBudget
// (minAvailable = minReplicas) holds to replicas - minReplicas at a time; the
// budget follows minReplicas.
TEST_F(NodeLossTest, TheDisruptionBudgetKeepsEvictionsAboveMinReplicas) {
  StartOperator();
  CreateJob({{"replicas", 3}, {"minReplicas", 2}, {"maxReplicas", 3}});
  const std::string pdb_path = "/apis/policy/v1/namespaces/" + ns_ + "/poddisruptionbudgets/nl";
  ASSERT_TRUE(WaitFor([&] { return cluster_->admin().Get(pdb_path).ok(); }, 30s));
  Json pdb = cluster_->admin().Get(pdb_path).value();
  EXPECT_EQ(pdb["spec"]["minAvailable"], 2);
  EXPECT_EQ(pdb["metadata"]["ownerReferences"][0]["kind"], "HorovodJob");
  ASSERT_TRUE(WaitFor([&] { return Pod("nl-worker-2").is_object(); }, 30s));
  CreateLostNode(0s, /*ready=*/true);
  for (const char* pod : {"nl-worker-0", "nl-worker-1", "nl-worker-2"}) Bind(pod);
  auto allowed = [&] {
    auto r = cluster_->admin().Get(pdb_path);
    return r.ok() ? r.value()["status"].value("disruptionsAllowed", -1) : -1;
  };
  ASSERT_TRUE(WaitFor([&] { return allowed() == 1; }, 30s))
      << cluster_->admin().Get(pdb_path).value().dump();
  auto evict = [&](const std::string& pod) {
    Json eviction = {{"apiVersion", "policy/v1"},
                     {"kind", "Eviction"},
                     {"metadata", {{"name", pod}, {"namespace", ns_}}}};
    return cluster_->admin().Post("/api/v1/namespaces/" + ns_ + "/pods/" + pod + "/eviction",
                                  eviction);
  };
  auto first = evict("nl-worker-0");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(Pod("nl-worker-0")["metadata"].contains("deletionTimestamp"));
  auto second = evict("nl-worker-1");
  ASSERT_FALSE(second.ok()) << "a second eviction would leave fewer than minReplicas";
  EXPECT_EQ(second.status().code(), kube::ApiCode::kTooManyRequests) << second.status().ToString();
  EXPECT_EQ(Job()["status"].value("restartCount", 0), 0);

  // minReplicas follows the spec: the budget is patched.
  Json patch = {{"spec", {{"minReplicas", 1}}}};
  auto r =
      cluster_->admin().Patch("/apis/khorovod.dev/v1alpha1/namespaces/" + ns_ + "/horovodjobs/nl",
                              patch.dump(), kube::PatchType::kMerge);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(WaitFor(
      [&] { return cluster_->admin().Get(pdb_path).value()["spec"]["minAvailable"] == 1; }, 30s));
}

}  // namespace
}  // namespace khorovod::optest
