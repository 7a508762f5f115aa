// The operator against a real kube-apiserver + etcd + kube-controller-manager
// on loopback (ctest fixture "k8s"). No kubelet runs: the test plays it by
// setting pod status through the API. Garbage collection is real (the
// controller-manager's garbage collector), not asserted from ownerReferences.
#include <gtest/gtest.h>
#include <signal.h>

#include <optional>
#include <set>

#include "test_cluster.h"

namespace khorovod::optest {
namespace {

using namespace std::chrono_literals;

const std::string kJobs = "/apis/khorovod.dev/v1alpha1/namespaces/";

Json JobManifest(const std::string& name, int replicas, int min, int max,
                 Json run_policy = Json::object()) {
  return {
      {"apiVersion", "khorovod.dev/v1alpha1"},
      {"kind", "HorovodJob"},
      {"metadata", {{"name", name}}},
      {"spec",
       {{"replicas", replicas},
        {"minReplicas", min},
        {"maxReplicas", max},
        {"runPolicy", run_policy},
        {"worker",
         {{"template",
           {{"spec",
             {{"containers",
               Json::array({{{"name", "trainer"},
                             {"image", "khorovod/runtime:test"},
                             {"command", Json::array({"khorovod-example-trainer"})}}})}}}}}}}}}};
}

class OperatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = TestCluster::FromEnvironment();
    ASSERT_NE(cluster_, nullptr);
    ns_ =
        cluster_->CreateNamespace(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override {
    if (HasFailure()) {
      for (auto& op : operators_) std::cerr << "---- operator log\n" << op->Log() << "\n";
      std::string out;
      cluster_->Kubectl({"-n", ns_, "get", "hvdjob,pods,svc,secret,events", "-o", "wide"}, &out);
      std::cerr << "---- namespace " << ns_ << "\n" << out << "\n";
    }
    operators_.clear();
    if (cluster_) (void)cluster_->admin().Delete("/api/v1/namespaces/" + ns_);
  }

  OperatorProcess& StartOperator(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--namespace",
                                     ns_,
                                     "--lease-namespace",
                                     ns_,
                                     "--lease-duration-seconds",
                                     "4",
                                     "--renew-deadline-seconds",
                                     "3",
                                     "--retry-period-seconds",
                                     "1",
                                     "--resync-seconds",
                                     "30"};
    args.insert(args.end(), extra.begin(), extra.end());
    operators_.push_back(std::make_unique<OperatorProcess>(
        *cluster_, args, ns_ + "-op" + std::to_string(operators_.size())));
    return *operators_.back();
  }

  void CreateJob(const Json& manifest) {
    auto r = cluster_->admin().Post(kJobs + ns_ + "/horovodjobs", manifest);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  Json Job(const std::string& name) {
    auto r = cluster_->admin().Get(kJobs + ns_ + "/horovodjobs/" + name);
    return r.ok() ? r.value() : Json();
  }
  std::string Phase(const std::string& name) {
    Json j = Job(name);
    return j.is_object() ? j.value("status", Json::object()).value("phase", "") : "<gone>";
  }
  bool HasCondition(const std::string& name, const std::string& type,
                    const std::string& reason = "") {
    Json j = Job(name);
    if (!j.is_object()) return false;
    for (const auto& c : j.value("status", Json::object()).value("conditions", Json::array()))
      if (c.value("type", "") == type && c.value("status", "") == "True" &&
          (reason.empty() || c.value("reason", "") == reason))
        return true;
    return false;
  }
  // Worker pods by name -> uid.
  std::map<std::string, std::string> Workers(const std::string& job) {
    std::map<std::string, std::string> out;
    auto r = cluster_->admin().Get(
        "/api/v1/namespaces/" + ns_ + "/pods?labelSelector=" +
        kube::UrlEncode("khorovod.dev/job-name=" + job + ",khorovod.dev/role=worker"));
    if (!r.ok()) return out;
    for (const auto& p : r.value()["items"]) {
      if (p["metadata"].contains("deletionTimestamp")) continue;
      out[p["metadata"]["name"]] = p["metadata"]["uid"];
    }
    return out;
  }
  bool Exists(const std::string& path) { return cluster_->admin().Get(path).ok(); }
  void MarkAllRunning(const std::string& job) {
    for (const auto& [name, uid] : Workers(job))
      ASSERT_TRUE(cluster_->SetPodStatus(ns_, name, "Running", true));
  }
  std::vector<std::string> EventReasons() {
    std::vector<std::string> out;
    auto r = cluster_->admin().Get("/api/v1/namespaces/" + ns_ + "/events");
    if (r.ok()) {
      for (const auto& e : r.value()["items"]) out.push_back(e.value("reason", ""));
    }
    return out;
  }
  bool HasEvent(const std::string& reason) {
    auto r = EventReasons();
    return std::find(r.begin(), r.end(), reason) != r.end();
  }

  std::unique_ptr<TestCluster> cluster_;
  std::string ns_;
  std::vector<std::unique_ptr<OperatorProcess>> operators_;
};

TEST_F(OperatorTest, CreateMakesPodsServicesAndSecretWithTheRightFields) {
  StartOperator();
  CreateJob(JobManifest("mlp", 3, 2, 4));
  ASSERT_TRUE(WaitFor([&] { return Workers("mlp").size() == 3; }, 30s));
  const std::string core = "/api/v1/namespaces/" + ns_;
  ASSERT_TRUE(WaitFor([&] { return Exists(core + "/pods/mlp-rendezvous"); }, 10s));
  EXPECT_TRUE(Exists(core + "/services/mlp-rendezvous"));
  EXPECT_TRUE(Exists(core + "/services/mlp-worker"));
  auto secret = cluster_->admin().Get(core + "/secrets/mlp-token");
  ASSERT_TRUE(secret.ok());
  EXPECT_EQ(secret.value()["data"]["token"].get<std::string>().size(), 88u)
      << "64 hex chars, base64-encoded";
  auto pod = cluster_->admin().Get(core + "/pods/mlp-worker-2");
  ASSERT_TRUE(pod.ok());
  const Json& p = pod.value();
  EXPECT_EQ(p["spec"]["hostname"], "mlp-worker-2");
  EXPECT_EQ(p["spec"]["subdomain"], "mlp-worker");
  EXPECT_EQ(p["metadata"]["ownerReferences"][0]["kind"], "HorovodJob");
  EXPECT_EQ(p["metadata"]["ownerReferences"][0]["uid"], Job("mlp")["metadata"]["uid"]);
  std::set<std::string> env;
  for (const auto& e : p["spec"]["containers"][0]["env"]) env.insert(e["name"]);
  for (const char* want : {"KHOROVOD_RENDEZVOUS_ADDR", "KHOROVOD_RENDEZVOUS_TOKEN",
                           "KHOROVOD_JOB_ID", "KHOROVOD_WORKER_NAME", "KHOROVOD_HOSTNAME"})
    EXPECT_TRUE(env.count(want)) << want;
  ASSERT_TRUE(WaitFor([&] { return Phase("mlp") == "Created"; }, 10s)) << Phase("mlp");
  Json status = Job("mlp")["status"];
  EXPECT_EQ(status["selector"], "khorovod.dev/job-name=mlp,khorovod.dev/role=worker");
  EXPECT_EQ(status["observedGeneration"], 1);
  EXPECT_TRUE(WaitFor([&] { return HasEvent("SuccessfulCreatePod"); }, 10s));
}

TEST_F(OperatorTest, RunningPodsMakeTheJobRunningAndPrinterColumnsShowIt) {
  StartOperator();
  CreateJob(JobManifest("run", 2, 2, 2));
  ASSERT_TRUE(WaitFor([&] { return Workers("run").size() == 2; }, 30s));
  MarkAllRunning("run");
  ASSERT_TRUE(WaitFor([&] { return Phase("run") == "Running"; }, 20s)) << Phase("run");
  EXPECT_EQ(Job("run")["status"]["readyReplicas"], 2);
  EXPECT_TRUE(HasCondition("run", "Running"));
  std::string out;
  ASSERT_EQ(cluster_->Kubectl({"-n", ns_, "get", "hvdjob", "run"}, &out), 0) << out;
  EXPECT_NE(out.find("PHASE"), std::string::npos) << out;
  EXPECT_NE(out.find("Running"), std::string::npos) << out;
}

TEST_F(OperatorTest, AFailedWorkerIsReplacedWithRestartingCondition) {
  StartOperator();
  CreateJob(JobManifest("heal", 3, 2, 3));
  ASSERT_TRUE(WaitFor([&] { return Workers("heal").size() == 3; }, 30s));
  MarkAllRunning("heal");
  ASSERT_TRUE(WaitFor([&] { return Phase("heal") == "Running"; }, 20s));
  const std::string old_uid = Workers("heal")["heal-worker-1"];
  ASSERT_TRUE(cluster_->SetPodStatus(ns_, "heal-worker-1", "Failed", false, 137));
  ASSERT_TRUE(WaitFor([&] { return HasCondition("heal", "Restarting"); }, 20s))
      << Job("heal").dump();
  ASSERT_TRUE(WaitFor(
      [&] {
        auto w = Workers("heal");
        return w.count("heal-worker-1") && w["heal-worker-1"] != old_uid;
      },
      30s))
      << "a new incarnation of worker 1";
  EXPECT_EQ(Job("heal")["status"]["restartCount"], 1);
  ASSERT_TRUE(cluster_->SetPodStatus(ns_, "heal-worker-1", "Running", true));
  ASSERT_TRUE(WaitFor([&] { return Phase("heal") == "Running"; }, 20s)) << Phase("heal");
  EXPECT_FALSE(HasCondition("heal", "Restarting"));
  EXPECT_TRUE(WaitFor([&] { return HasEvent("WorkerFailed"); }, 10s));
}

TEST_F(OperatorTest, AFailureCountedBeforeTheOperatorDiedIsNotCountedAgain) {
  StartOperator();
  CreateJob(JobManifest("once", 2, 1, 2));
  ASSERT_TRUE(WaitFor([&] { return Workers("once").size() == 2; }, 30s));
  MarkAllRunning("once");
  ASSERT_TRUE(WaitFor([&] { return Phase("once") == "Running"; }, 20s));
  operators_.back()->Kill(SIGKILL);
  ASSERT_TRUE(WaitFor([&] { return !operators_.back()->Running(); }, 10s));
  // Play an operator that died between its status write and its pod delete:
  // worker 1 failed, and the stored status already counts it.
  const std::string failed_uid = Workers("once")["once-worker-1"];
  ASSERT_TRUE(cluster_->SetPodStatus(ns_, "once-worker-1", "Failed", false, 137));
  Json job = Job("once");
  job["status"]["restartCount"] = 1;
  job["status"]["countedFailures"] = Json::array({failed_uid});
  auto written = cluster_->admin().Put(kJobs + ns_ + "/horovodjobs/once/status", job);
  ASSERT_TRUE(written.ok()) << written.status().ToString();

  StartOperator();  // the restarted operator
  ASSERT_TRUE(WaitFor(
      [&] {
        auto w = Workers("once");
        return w.count("once-worker-1") && w["once-worker-1"] != failed_uid;
      },
      30s))
      << "the failed pod is still replaced";
  ASSERT_TRUE(WaitFor(
      [&] { return Job("once")["status"].value("countedFailures", Json::array()).empty(); }, 20s))
      << "the UID is forgotten once the pod is gone: " << Job("once")["status"].dump();
  EXPECT_EQ(Job("once")["status"]["restartCount"], 1)
      << "counted once, not again by the restarted operator";
}

TEST_F(OperatorTest, AManifestWithOnlyReplicasRunsAsANonElasticJob) {
  StartOperator();
  Json manifest = JobManifest("plain", 4, 1, 1);
  manifest["spec"].erase("minReplicas");
  manifest["spec"].erase("maxReplicas");
  CreateJob(manifest);
  EXPECT_FALSE(Job("plain")["spec"].contains("maxReplicas"))
      << "no schema default of 1 for the bounds";
  ASSERT_TRUE(WaitFor([&] { return Workers("plain").size() == 4; }, 30s)) << Job("plain").dump();
  MarkAllRunning("plain");
  ASSERT_TRUE(WaitFor([&] { return Phase("plain") == "Running"; }, 20s)) << Job("plain").dump();
  auto rdv = cluster_->admin().Get("/api/v1/namespaces/" + ns_ + "/pods/plain-rendezvous");
  ASSERT_TRUE(rdv.ok());
  const std::string args = rdv.value()["spec"]["containers"][0]["args"].dump();
  EXPECT_NE(args.find(R"("--min-workers","4","--max-workers","4")"), std::string::npos) << args;
  std::string out;
  EXPECT_NE(cluster_->Kubectl({"-n", ns_, "scale", "hvdjob", "plain", "--replicas", "6"}, &out), 0)
      << out;
  EXPECT_NE(out.find("cannot change: set both to make the job elastic"), std::string::npos) << out;
  EXPECT_EQ(Job("plain")["spec"]["replicas"], 4);
}

TEST_F(OperatorTest, NamesTooLongOrInvalidForDerivedNamesAreRefusedAtAdmission) {
  struct Case {
    std::string name;
    const char* message;
  } refused[] = {
      {std::string(60, 'a'), "metadata.name must be at most 51 characters"},
      {std::string(52, 'b'), "metadata.name must be at most 51 characters"},
      {"1job", "metadata.name must consist of lowercase letters"},
      {"my.job", "metadata.name must consist of lowercase letters"},
  };
  for (const auto& c : refused) {
    auto r = cluster_->admin().Post(kJobs + ns_ + "/horovodjobs", JobManifest(c.name, 1, 1, 1));
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), kube::ApiCode::kInvalid) << c.name;
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status().ToString();
  }
  // The longest accepted name works: every derived name is valid.
  StartOperator();
  const std::string longest(51, 'c');
  CreateJob(JobManifest(longest, 2, 1, 2));
  ASSERT_TRUE(WaitFor([&] { return Workers(longest).size() == 2; }, 30s)) << Job(longest).dump();
  const std::string core = "/api/v1/namespaces/" + ns_;
  ASSERT_TRUE(WaitFor([&] { return Exists(core + "/pods/" + longest + "-rendezvous"); }, 10s));
  EXPECT_TRUE(Exists(core + "/services/" + longest + "-rendezvous"));
  EXPECT_TRUE(Exists(core + "/services/" + longest + "-worker"));
  EXPECT_FALSE(HasEvent("ReconcileError"));
}

// One training process per GPU: the API server refuses a slotsPerWorker that
// contradicts the worker container's nvidia.com/gpu limit (CEL in the CRD),
// naming both numbers; left out, the operator runs one slot per GPU.
TEST_F(OperatorTest, SlotsAgainstGpuLimitAtAdmission) {
  auto with_gpus = [](const std::string& name, Json gpus, std::optional<int> slots) {
    Json job = JobManifest(name, 1, 1, 1);
    job["spec"]["worker"]["template"]["spec"]["containers"][0]["resources"] = {
        {"limits", {{"nvidia.com/gpu", gpus}}}};
    if (slots) job["spec"]["slotsPerWorker"] = *slots;
    return job;
  };
  for (const Json& gpus : {Json(2), Json("2")}) {
    auto r =
        cluster_->admin().Post(kJobs + ns_ + "/horovodjobs", with_gpus("contradicts", gpus, 3));
    ASSERT_FALSE(r.ok()) << gpus.dump();
    EXPECT_EQ(r.status().code(), kube::ApiCode::kInvalid);
    EXPECT_NE(r.status().message().find(
                  "slotsPerWorker 3 contradicts the nvidia.com/gpu limit 2 of the first worker "
                  "container"),
              std::string::npos)
        << r.status().ToString();
  }
  ASSERT_TRUE(cluster_->admin().Post(kJobs + ns_ + "/horovodjobs", with_gpus("agrees", 2, 2)).ok());
  ASSERT_TRUE(cluster_->admin()
                  .Post(kJobs + ns_ + "/horovodjobs", with_gpus("defaulted", "2", std::nullopt))
                  .ok());
  StartOperator();
  ASSERT_TRUE(WaitFor([&] { return Workers("defaulted").size() == 1; }, 30s))
      << Job("defaulted").dump();
  auto pod = cluster_->admin().Get("/api/v1/namespaces/" + ns_ + "/pods/defaulted-worker-0");
  ASSERT_TRUE(pod.ok());
  std::string slots;
  for (const auto& e : pod.value()["spec"]["containers"][0]["env"])
    if (e.value("name", "") == "KHOROVOD_SLOTS") slots = e.value("value", "");
  EXPECT_EQ(slots, "2") << "slotsPerWorker follows the GPU limit";
  EXPECT_TRUE(WaitFor(
      [&] {
        const Json status = Job("defaulted").value("status", Json::object());
        return status.is_object() && status.value("gpusWanted", 0) == 2;
      },
      20s))
      << Job("defaulted").dump();
}

TEST_F(OperatorTest, BackoffExhaustedFailsTheJob) {
  StartOperator();
  CreateJob(JobManifest("fragile", 2, 1, 2, {{"backoffLimit", 1}}));
  ASSERT_TRUE(WaitFor([&] { return Workers("fragile").size() == 2; }, 30s));
  std::string previous_uid;
  for (int round = 0; round < 2; ++round) {
    // Fail each incarnation of worker 0 once it exists.
    ASSERT_TRUE(WaitFor(
        [&] {
          auto w = Workers("fragile");
          return w.count("fragile-worker-0") && w["fragile-worker-0"] != previous_uid;
        },
        30s));
    previous_uid = Workers("fragile")["fragile-worker-0"];
    ASSERT_TRUE(cluster_->SetPodStatus(ns_, "fragile-worker-0", "Failed", false, 1));
  }
  ASSERT_TRUE(WaitFor([&] { return Phase("fragile") == "Failed"; }, 20s)) << Job("fragile").dump();
  EXPECT_TRUE(HasCondition("fragile", "Failed", "BackoffLimitExceeded"));
  EXPECT_TRUE(WaitFor(
      [&] {
        auto w = Workers("fragile");
        return w.size() == 1 && w.count("fragile-worker-0");
      },
      20s))
      << "cleanPodPolicy Running removes the live worker and keeps the failed one for its logs";
}

TEST_F(OperatorTest, ScaleSubresourceScalesUpAndDown) {
  StartOperator();
  CreateJob(JobManifest("elastic", 4, 2, 6));
  ASSERT_TRUE(WaitFor([&] { return Workers("elastic").size() == 4; }, 30s));
  MarkAllRunning("elastic");
  ASSERT_TRUE(WaitFor([&] { return Phase("elastic") == "Running"; }, 20s));
  std::string out;
  ASSERT_EQ(cluster_->Kubectl({"-n", ns_, "scale", "hvdjob", "elastic", "--replicas", "2"}, &out),
            0)
      << out;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto w = Workers("elastic");
        return w.size() == 2 && w.count("elastic-worker-0") && w.count("elastic-worker-1");
      },
      30s))
      << "the highest indices go first";
  ASSERT_EQ(cluster_->Kubectl({"-n", ns_, "scale", "hvdjob", "elastic", "--replicas", "6"}, &out),
            0)
      << out;
  ASSERT_TRUE(WaitFor([&] { return Workers("elastic").size() == 6; }, 30s));
  ASSERT_TRUE(WaitFor([&] { return HasCondition("elastic", "Scaling"); }, 20s));
  MarkAllRunning("elastic");
  ASSERT_TRUE(WaitFor(
      [&] { return Phase("elastic") == "Running" && Job("elastic")["status"]["replicas"] == 6; },
      20s));
  // Out of bounds: the API server's validation refuses it.
  EXPECT_NE(cluster_->Kubectl({"-n", ns_, "scale", "hvdjob", "elastic", "--replicas", "7"}, &out),
            0);
  EXPECT_NE(out.find("replicas must lie between"), std::string::npos) << out;
  ASSERT_EQ(cluster_->Kubectl(
                {"-n", ns_, "get", "hvdjob", "elastic", "-o", "jsonpath={.status.selector}"}, &out),
            0);
  EXPECT_EQ(out, "khorovod.dev/job-name=elastic,khorovod.dev/role=worker");
}

TEST_F(OperatorTest, DeletingTheJobGarbageCollectsEverythingItOwns) {
  StartOperator();
  CreateJob(JobManifest("gc", 2, 1, 2));
  const std::string core = "/api/v1/namespaces/" + ns_;
  ASSERT_TRUE(WaitFor(
      [&] { return Workers("gc").size() == 2 && Exists(core + "/secrets/gc-token"); }, 30s));
  ASSERT_TRUE(cluster_->admin().Delete(kJobs + ns_ + "/horovodjobs/gc").ok());
  // The controller-manager's garbage collector deletes the dependents.
  EXPECT_TRUE(WaitFor(
      [&] {
        return Workers("gc").empty() && !Exists(core + "/pods/gc-rendezvous") &&
               !Exists(core + "/secrets/gc-token") && !Exists(core + "/services/gc-worker") &&
               !Exists(core + "/services/gc-rendezvous");
      },
      60s));
}

TEST_F(OperatorTest, RestartedOperatorCreatesNothingTwice) {
  auto& first = StartOperator();
  CreateJob(JobManifest("twice", 24, 1, 24));
  // Kill it mid-reconcile: as soon as some, but not all, workers exist.
  WaitFor([&] { return !Workers("twice").empty(); }, 30s);
  first.Kill(SIGKILL);
  auto before = Workers("twice");
  StartOperator();
  ASSERT_TRUE(WaitFor([&] { return Workers("twice").size() == 24; }, 60s));
  auto after = Workers("twice");
  for (const auto& [name, uid] : before) EXPECT_EQ(after[name], uid) << name << " was re-created";
  auto all = cluster_->admin().Get("/api/v1/namespaces/" + ns_ + "/pods");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all.value()["items"].size(), 25u) << "24 workers + 1 rendezvous, no duplicates";
  auto secrets = cluster_->admin().Get("/api/v1/namespaces/" + ns_ +
                                       "/secrets?labelSelector=khorovod.dev%2Fjob-name");
  EXPECT_EQ(secrets.value()["items"].size(), 1u);
}

TEST_F(OperatorTest, TwoReplicasElectOneLeaderAndFailOver) {
  auto& a = StartOperator();
  auto& b = StartOperator();
  auto leaders = [&] {
    double la = a.Metric("khorovod_operator_is_leader"),
           lb = b.Metric("khorovod_operator_is_leader");
    return std::make_pair(la, lb);
  };
  ASSERT_TRUE(WaitFor(
      [&] {
        auto [la, lb] = leaders();
        return la + lb == 1.0 && la >= 0 && lb >= 0;
      },
      20s))
      << leaders().first << " " << leaders().second;
  // Stay that way: never two leaders.
  for (int i = 0; i < 10; ++i) {
    auto [la, lb] = leaders();
    ASSERT_LE(la + lb, 1.0);
    std::this_thread::sleep_for(100ms);
  }
  OperatorProcess& leader = leaders().first == 1.0 ? a : b;
  OperatorProcess& standby = &leader == &a ? b : a;
  CreateJob(JobManifest("ha", 1, 1, 1));
  ASSERT_TRUE(WaitFor([&] { return Workers("ha").size() == 1; }, 30s));
  leader.Kill(SIGKILL);  // no lease release: the standby waits out the lease
  ASSERT_TRUE(WaitFor([&] { return standby.Metric("khorovod_operator_is_leader") == 1.0; }, 30s));
  ASSERT_TRUE(cluster_->SetPodStatus(ns_, "ha-worker-0", "Running", true));
  EXPECT_TRUE(WaitFor([&] { return Phase("ha") == "Running"; }, 20s))
      << "the new leader reconciles";
}

TEST_F(OperatorTest, ExpiredWatchIsSurvivedByReListing) {
  // Watches end every 2 s; HorovodJob watches go to etcd, which the API
  // server compacts every 5 s while leases keep the revision moving. The
  // informer's next watch from its old resourceVersion is answered 410 Gone.
  auto& op = StartOperator({"--watch-timeout-seconds", "2"});
  CreateJob(JobManifest("before", 1, 1, 1));
  ASSERT_TRUE(WaitFor([&] { return Workers("before").size() == 1; }, 30s));
  ASSERT_TRUE(
      WaitFor([&] { return op.Metric("khorovod_operator_informer_lists_total") >= 2.0; }, 60s))
      << op.Log();
  EXPECT_NE(op.Log().find("re-listing"), std::string::npos);
  CreateJob(JobManifest("after", 2, 1, 2));
  EXPECT_TRUE(WaitFor([&] { return Workers("after").size() == 2; }, 30s))
      << "still reconciling after the re-list";
  EXPECT_EQ(Workers("before").size(), 1u) << "the re-list created nothing twice";
}

TEST_F(OperatorTest, SuccessSuspendAndTtl) {
  StartOperator();
  CreateJob(JobManifest("pause", 2, 1, 2, {{"suspend", true}}));
  ASSERT_TRUE(WaitFor([&] { return Phase("pause") == "Suspended"; }, 20s)) << Phase("pause");
  EXPECT_TRUE(Workers("pause").empty());
  ASSERT_TRUE(cluster_->admin()
                  .Patch(kJobs + ns_ + "/horovodjobs/pause",
                         R"({"spec":{"runPolicy":{"suspend":false}}})", kube::PatchType::kMerge)
                  .ok());
  ASSERT_TRUE(WaitFor([&] { return Workers("pause").size() == 2; }, 30s))
      << "resume re-creates the pods";

  CreateJob(JobManifest("done", 2, 1, 2, {{"ttlSecondsAfterFinished", 2}}));
  ASSERT_TRUE(WaitFor([&] { return Workers("done").size() == 2; }, 30s));
  MarkAllRunning("done");
  for (const auto& [name, uid] : Workers("done"))
    ASSERT_TRUE(cluster_->SetPodStatus(ns_, name, "Succeeded", false, 0));
  ASSERT_TRUE(WaitFor([&] { return Phase("done") == "Succeeded"; }, 20s)) << Job("done").dump();
  EXPECT_TRUE(HasCondition("done", "Succeeded"));
  EXPECT_FALSE(Job("done")["status"].value("completionTime", "").empty());
  EXPECT_TRUE(WaitFor([&] { return Phase("done") == "<gone>"; }, 30s))
      << "deleted after ttlSecondsAfterFinished";
}

TEST_F(OperatorTest, InvalidSpecsAreRejectedOrMarkedFailed) {
  StartOperator();
  struct Case {
    Json manifest;
    const char* message;
  } rejected[] = {
      {JobManifest("too-many", 5, 1, 4), "replicas must lie between"},
      {JobManifest("min-max", 2, 3, 2), "minReplicas must not exceed maxReplicas"},
      {[] {
         Json j = JobManifest("no-containers", 1, 1, 1);
         j["spec"]["worker"]["template"]["spec"]["containers"] = Json::array();
         return j;
       }(),
       "should have at least 1 items"},
      {[] {
         Json j = JobManifest("bad-policy", 1, 1, 1);
         j["spec"]["runPolicy"]["cleanPodPolicy"] = "Sometimes";
         return j;
       }(),
       "Unsupported value"},
  };
  for (const auto& c : rejected) {
    auto r = cluster_->admin().Post(kJobs + ns_ + "/horovodjobs", c.manifest);
    ASSERT_FALSE(r.ok()) << c.manifest.dump();
    EXPECT_EQ(r.status().code(), kube::ApiCode::kInvalid);
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status().ToString();
  }
  // Accepted by the schema, refused by the operator's own validation.
  Json j = JobManifest("gang-too-big", 2, 1, 2);
  j["spec"]["schedulingPolicy"] = {{"gang", true}, {"minAvailable", 5}};
  CreateJob(j);
  ASSERT_TRUE(WaitFor([&] { return Phase("gang-too-big") == "Failed"; }, 20s));
  EXPECT_TRUE(HasCondition("gang-too-big", "Failed", "InvalidSpec"));
  EXPECT_TRUE(Workers("gang-too-big").empty());
  EXPECT_TRUE(operators_[0]->Running()) << "no crash loop";
}

}  // namespace
}  // namespace khorovod::optest
