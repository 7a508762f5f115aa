// The pure object builders: every field the runtime and Kubernetes rely on.
#include "controller/builders.h"

#include <gtest/gtest.h>

#include "controller/token.h"

namespace khorovod::op {
namespace {

HorovodJob Job() {
  std::vector<FieldError> errors;
  HorovodJob job = DecodeHorovodJob(Json::parse(R"({
    "metadata": {"name": "mlp", "namespace": "team", "uid": "uid-1"},
    "spec": {"replicas": 4, "minReplicas": 2, "maxReplicas": 8, "slotsPerWorker": 2,
             "rendezvous": {"port": 3000},
             "schedulingPolicy": {"priorityClassName": "high", "gang": true},
             "worker": {"template": {
               "metadata": {"labels": {"team": "ml"}, "annotations": {"a": "b"}},
               "spec": {"restartPolicy": "Always", "containers": [
                 {"name": "trainer", "image": "img:2", "env": [{"name": "KHOROVOD_JOB_ID", "value": "spoofed"}, {"name": "USER_VAR", "value": "1"}]},
                 {"name": "sidecar", "image": "side:1"}]}}}}})"),
                                    errors);
  EXPECT_TRUE(errors.empty());
  return job;
}

std::string EnvValue(const Json& container, const std::string& name) {
  for (const auto& e : container["env"])
    if (e["name"] == name)
      return e.contains("value") ? e["value"].get<std::string>() : e["valueFrom"].dump();
  return "<missing>";
}

TEST(Builders, WorkerPodIsRankedAndWired) {
  HorovodJob job = Job();
  Json pod = BuildWorkerPod(job, 3);
  EXPECT_EQ(pod["metadata"]["name"], "mlp-worker-3");
  EXPECT_EQ(pod["metadata"]["namespace"], "team");
  EXPECT_EQ(pod["metadata"]["labels"]["team"], "ml") << "template labels are kept";
  EXPECT_EQ(pod["metadata"]["labels"][kLabelJobName], "mlp");
  EXPECT_EQ(pod["metadata"]["labels"][kLabelRole], "worker");
  EXPECT_EQ(pod["metadata"]["labels"][kLabelWorkerIndex], "3");
  EXPECT_EQ(pod["metadata"]["annotations"]["a"], "b");
  EXPECT_EQ(WorkerIndexOf(pod), 3);
  const Json& owner = pod["metadata"]["ownerReferences"][0];
  EXPECT_EQ(owner["uid"], "uid-1");
  EXPECT_EQ(owner["kind"], "HorovodJob");
  EXPECT_EQ(owner["controller"], true);
  EXPECT_EQ(pod["spec"]["hostname"], "mlp-worker-3");
  EXPECT_EQ(pod["spec"]["subdomain"], "mlp-worker");
  EXPECT_EQ(pod["spec"]["restartPolicy"], "Never") << "the operator replaces failed workers itself";
  EXPECT_EQ(pod["spec"]["priorityClassName"], "high");
  EXPECT_EQ(pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"], "mlp");
  for (const auto& c : pod["spec"]["containers"]) {
    EXPECT_EQ(EnvValue(c, "KHOROVOD_RENDEZVOUS_ADDR"), "mlp-rendezvous.team.svc:3000");
    EXPECT_EQ(EnvValue(c, "KHOROVOD_JOB_ID"), "mlp") << "operator wiring overrides the template";
    EXPECT_EQ(EnvValue(c, "KHOROVOD_SLOTS"), "2");
    EXPECT_EQ(EnvValue(c, "KHOROVOD_LOCAL_RANKS"), "pod") << "Horovod's ranks by pod by default";
    EXPECT_NE(EnvValue(c, "KHOROVOD_NODE_NAME").find("spec.nodeName"), std::string::npos);
    EXPECT_NE(EnvValue(c, "KHOROVOD_RENDEZVOUS_TOKEN").find("mlp-token"), std::string::npos);
    EXPECT_NE(EnvValue(c, "KHOROVOD_WORKER_NAME").find("metadata.name"), std::string::npos);
    EXPECT_NE(EnvValue(c, "KHOROVOD_HOSTNAME").find("status.podIP"), std::string::npos);
  }
  EXPECT_EQ(EnvValue(pod["spec"]["containers"][0], "USER_VAR"), "1") << "user env is kept";
  const Json& trainer = pod["spec"]["containers"][0];
  EXPECT_EQ(EnvValue(trainer, "KHOROVOD_METRICS_PORT"), "29500");
  EXPECT_NE(EnvValue(trainer, "KHOROVOD_METRICS_HOST").find("status.podIP"), std::string::npos);
  EXPECT_EQ(trainer["ports"][0]["name"], "metrics");
  job.spec.worker_template["spec"]["containers"][0]["env"].push_back(
      {{"name", "KHOROVOD_METRICS_PORT"}, {"value", "0"}});
  EXPECT_EQ(EnvValue(BuildWorkerPod(job, 0)["spec"]["containers"][0], "KHOROVOD_METRICS_PORT"), "0")
      << "a user's choice (0 turns metrics off) wins";
}

TEST(Builders, LocalRanksByNodeReachEveryContainer) {
  HorovodJob job = Job();
  job.spec.local_ranks = LocalRanks::kNode;
  const Json pod = BuildWorkerPod(job, 0);  // kept: the loop reads into it
  for (const auto& c : pod["spec"]["containers"])
    EXPECT_EQ(EnvValue(c, "KHOROVOD_LOCAL_RANKS"), "node");
}

bool MountsSharedMemory(const Json& container) {
  if (!container.contains("volumeMounts")) return false;
  for (const auto& m : container["volumeMounts"])
    if (m["mountPath"] == "/dev/shm" && m["name"] == kSharedMemoryVolume) return true;
  return false;
}

int SharedMemoryVolumes(const Json& pod) {
  int n = 0;
  if (!pod["spec"].contains("volumes")) return 0;
  for (const auto& v : pod["spec"]["volumes"]) {
    if (v["name"] != kSharedMemoryVolume) continue;
    EXPECT_EQ(v["emptyDir"]["medium"], "Memory");
    ++n;
  }
  return n;
}

TEST(Builders, SeveralSlotsPerWorkerGetAMemoryBackedDevShm) {
  HorovodJob job = Job();  // slotsPerWorker: 2
  Json pod = BuildWorkerPod(job, 0);
  EXPECT_EQ(SharedMemoryVolumes(pod), 1);
  for (const auto& c : pod["spec"]["containers"]) EXPECT_TRUE(MountsSharedMemory(c)) << c["name"];
  EXPECT_EQ(pod, BuildWorkerPod(job, 0)) << "still a pure function";
}

TEST(Builders, OneSlotPerWorkerKeepsTheDefaultDevShm) {
  HorovodJob job = Job();
  job.spec.slots_per_worker = 1;
  Json pod = BuildWorkerPod(job, 0);
  EXPECT_EQ(SharedMemoryVolumes(pod), 0);
  for (const auto& c : pod["spec"]["containers"]) EXPECT_FALSE(MountsSharedMemory(c));
}

TEST(Builders, AUsersOwnDevShmMountWins) {
  HorovodJob job = Job();
  Json& spec = job.spec.worker_template["spec"];
  spec["volumes"] = Json::array({{{"name", "mine"}, {"emptyDir", {{"sizeLimit", "1Gi"}}}}});
  spec["containers"][0]["volumeMounts"] =
      Json::array({{{"name", "mine"}, {"mountPath", "/dev/shm"}}});
  Json pod = BuildWorkerPod(job, 0);
  const Json& trainer = pod["spec"]["containers"][0];
  ASSERT_EQ(trainer["volumeMounts"].size(), 1u) << "no second mount at /dev/shm";
  EXPECT_EQ(trainer["volumeMounts"][0]["name"], "mine");
  EXPECT_TRUE(MountsSharedMemory(pod["spec"]["containers"][1])) << "the sidecar still gets one";
  EXPECT_EQ(pod["spec"]["volumes"][0]["name"], "mine") << "the user's volumes are kept";
}

TEST(Builders, SameInputSameObject) {
  HorovodJob job = Job();
  EXPECT_EQ(BuildWorkerPod(job, 1), BuildWorkerPod(job, 1));
  EXPECT_EQ(BuildRendezvousPod(job), BuildRendezvousPod(job));
}

TEST(Builders, AReplacementWorkerKeepsItsWorkerName) {
  // The rendezvous knows a worker by KHOROVOD_WORKER_NAME, the pod's own
  // name; the replacement of a failed worker i is a new pod with the same
  // name, so it registers under the same worker name (docs/elastic.md).
  HorovodJob job = Job();
  Json failed = BuildWorkerPod(job, 2);
  failed["metadata"]["uid"] = "first-incarnation";
  Json replacement = BuildWorkerPod(job, 2);
  EXPECT_EQ(replacement["metadata"]["name"], failed["metadata"]["name"]);
  const Json name_env =
      Json::parse(EnvValue(replacement["spec"]["containers"][0], "KHOROVOD_WORKER_NAME"));
  EXPECT_EQ(name_env["fieldRef"]["fieldPath"], "metadata.name")
      << "the pod name, not its UID or node";
}

TEST(Builders, RendezvousPodRunsTheServerNonRoot) {
  HorovodJob job = Job();
  Json pod = BuildRendezvousPod(job);
  EXPECT_EQ(pod["metadata"]["name"], "mlp-rendezvous");
  EXPECT_EQ(pod["metadata"]["labels"][kLabelRole], "rendezvous");
  const Json& c = pod["spec"]["containers"][0];
  EXPECT_EQ(c["image"], "img:2");
  EXPECT_EQ(c["command"][0], "khorovod-rendezvous");
  std::string args = c["args"].dump();
  EXPECT_NE(args.find(R"("--min-workers","4")"), std::string::npos)
      << "min replicas x slots: " << args;
  EXPECT_NE(args.find(R"("--max-workers","16")"), std::string::npos) << args;
  EXPECT_NE(args.find(R"("--job","mlp")"), std::string::npos) << args;
  EXPECT_EQ(pod["spec"]["securityContext"]["runAsNonRoot"], true);
  EXPECT_EQ(c["securityContext"]["readOnlyRootFilesystem"], true);
  EXPECT_EQ(c["securityContext"]["allowPrivilegeEscalation"], false);
  EXPECT_EQ(pod["spec"]["automountServiceAccountToken"], false);
  EXPECT_FALSE(pod["spec"].contains("tolerations")) << "the template has none";
  job.spec.worker_template["spec"]["tolerations"] =
      Json::array({{{"key", "gpu"}, {"operator", "Exists"}}});
  job.spec.worker_template["spec"]["nodeSelector"] = {{"pool", "train"}};
  Json placed = BuildRendezvousPod(job);
  EXPECT_EQ(placed["spec"]["tolerations"][0]["key"], "gpu") << "runs where the workers may run";
  EXPECT_EQ(placed["spec"]["nodeSelector"]["pool"], "train");
}

TEST(Builders, ServicesAndSecret) {
  HorovodJob job = Job();
  Json headless = BuildWorkersService(job);
  EXPECT_EQ(headless["metadata"]["name"], "mlp-worker");
  EXPECT_EQ(headless["spec"]["clusterIP"], "None");
  EXPECT_EQ(headless["spec"]["selector"][kLabelRole], "worker");
  Json rdv = BuildRendezvousService(job);
  EXPECT_EQ(rdv["spec"]["ports"][0]["port"], 3000);
  EXPECT_EQ(rdv["spec"]["selector"][kLabelRole], "rendezvous");
  std::string t1 = NewToken().value(), t2 = NewToken().value();
  EXPECT_EQ(t1.size(), 64u);
  EXPECT_EQ(t1.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(t1, t2);
  Json secret = BuildTokenSecret(job, t1);
  EXPECT_EQ(secret["metadata"]["name"], "mlp-token");
  EXPECT_EQ(secret["stringData"]["token"], t1);
  EXPECT_EQ(secret["metadata"]["ownerReferences"][0]["uid"], "uid-1");
  EXPECT_EQ(WorkerSelector(job), "khorovod.dev/job-name=mlp,khorovod.dev/role=worker");
  Json pg = BuildPodGroup(job);
  EXPECT_EQ(pg["spec"]["minMember"], 2);
}

TEST(Builders, WorkerIndexOfRejectsGarbage) {
  Json pod = {{"metadata", {{"labels", {{kLabelWorkerIndex, "x1"}}}}}};
  EXPECT_EQ(WorkerIndexOf(pod), -1);
  pod["metadata"]["labels"][kLabelWorkerIndex] = "-2";
  EXPECT_EQ(WorkerIndexOf(pod), -1);
  pod["metadata"]["labels"].erase(kLabelWorkerIndex);
  EXPECT_EQ(WorkerIndexOf(pod), -1);
}

}  // namespace
}  // namespace khorovod::op
