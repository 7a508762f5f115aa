// What the builders add to a GPU job's pods: the GPU-taint toleration, the
// placement's affinity or spread, and the node avoidance after GPU failures.
#include <gtest/gtest.h>

#include "controller/builders.h"

namespace khorovod::op {
namespace {

HorovodJob Job(const std::string& extra_spec, const std::string& pod_spec_extra = "") {
  std::vector<FieldError> errors;
  HorovodJob job =
      DecodeHorovodJob(Json::parse(R"({"metadata": {"name": "g", "namespace": "ns", "uid": "u"},
    "spec": {"replicas": 2, )" + extra_spec +
                                   R"( "worker": {"template": {"spec": {)" + pod_spec_extra +
                                   R"( "containers": [{"name": "trainer", "image": "i",
      "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}}}})"),
                       errors);
  EXPECT_TRUE(errors.empty()) << JoinErrors(errors);
  return job;
}

const Json kGpuToleration = {
    {"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}};

TEST(GpuBuilders, GpuPodsTolerateTheGpuTaint) {
  HorovodJob job = Job("");
  Json worker = BuildWorkerPod(job, 0);
  EXPECT_EQ(worker["spec"]["tolerations"], Json::array({kGpuToleration}));
  // The rendezvous pod inherits the template's node selection, so it may have
  // to sit on a tainted GPU node too.
  EXPECT_EQ(BuildRendezvousPod(job)["spec"]["tolerations"], Json::array({kGpuToleration}));
}

TEST(GpuBuilders, TheTemplatesOwnGpuTolerationWins) {
  HorovodJob job =
      Job("", R"("tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "a100"}],
                              "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},)");
  Json worker = BuildWorkerPod(job, 0);
  ASSERT_EQ(worker["spec"]["tolerations"].size(), 1u);
  EXPECT_EQ(worker["spec"]["tolerations"][0]["value"], "a100");
  EXPECT_EQ(worker["spec"]["nodeSelector"]["nvidia.com/gpu.product"], "NVIDIA-A100-SXM4-80GB");
}

TEST(GpuBuilders, ACpuJobGetsNoGpuTolerationAndIsSpreadUnlessItSaysNone) {
  auto cpu_job = [](const std::string& scheduling) {
    std::vector<FieldError> errors;
    return DecodeHorovodJob(
        Json::parse(
            R"({"metadata": {"name": "c", "namespace": "ns"},
      "spec": {)" +
            scheduling +
            R"("worker": {"template": {"spec": {"containers": [{"name": "t", "image": "i"}]}}}}})"),
        errors);
  };
  Json worker = BuildWorkerPod(cpu_job(""), 0);
  EXPECT_FALSE(worker["spec"].contains("tolerations"));
  EXPECT_FALSE(worker["spec"].contains("affinity"));
  ASSERT_EQ(worker["spec"]["topologySpreadConstraints"].size(), 2u)
      << "spread by default: a lost node costs few ranks";
  EXPECT_EQ(worker["spec"]["topologySpreadConstraints"][0]["topologyKey"],
            "kubernetes.io/hostname");
  EXPECT_EQ(worker["spec"]["topologySpreadConstraints"][0]["whenUnsatisfiable"], "ScheduleAnyway");
  Json none = BuildWorkerPod(cpu_job(R"("schedulingPolicy": {"placement": "None"},)"), 0);
  EXPECT_FALSE(none["spec"].contains("topologySpreadConstraints"));
  EXPECT_FALSE(none["spec"].contains("affinity"));
}

TEST(GpuBuilders, PackPrefersNodesRunningTheJobsWorkers) {
  Json worker = BuildWorkerPod(Job(""), 1);
  const Json& preferred =
      worker["spec"]["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"];
  ASSERT_EQ(preferred.size(), 1u);
  EXPECT_EQ(preferred[0]["weight"], 100);
  EXPECT_EQ(preferred[0]["podAffinityTerm"]["topologyKey"], "kubernetes.io/hostname");
  EXPECT_EQ(preferred[0]["podAffinityTerm"]["labelSelector"]["matchLabels"],
            Json({{"khorovod.dev/job-name", "g"}, {"khorovod.dev/role", "worker"}}));
  EXPECT_FALSE(worker["spec"].contains("topologySpreadConstraints"));
}

TEST(GpuBuilders, SpreadSpreadsOverNodesAndZonesAsAPreference) {
  Json worker = BuildWorkerPod(Job(R"("schedulingPolicy": {"placement": "Spread"},)"), 0);
  const Json& constraints = worker["spec"]["topologySpreadConstraints"];
  ASSERT_EQ(constraints.size(), 2u);
  EXPECT_EQ(constraints[0]["topologyKey"], "kubernetes.io/hostname");
  EXPECT_EQ(constraints[1]["topologyKey"], "topology.kubernetes.io/zone");
  for (const auto& c : constraints) {
    EXPECT_EQ(c["maxSkew"], 1);
    EXPECT_EQ(c["whenUnsatisfiable"], "ScheduleAnyway");
  }
  EXPECT_FALSE(worker["spec"].contains("affinity"));
}

TEST(GpuBuilders, AvoidedNodesAreExcludedInEveryNodeSelectorTerm) {
  HorovodJob job =
      Job("", R"("affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
      {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a"]}]},
                             {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["b"]}]}]}}},)");
  Json worker = BuildWorkerPod(job, 0, {"n1", "n2"});
  const Json& terms = worker["spec"]["affinity"]["nodeAffinity"]
                            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 2u);
  for (const auto& term : terms) {
    EXPECT_EQ(term["matchExpressions"].size(), 1u) << "the user's requirement stays";
    EXPECT_EQ(
        term["matchFields"],
        Json::array({{{"key", "metadata.name"}, {"operator", "NotIn"}, {"values", {"n1", "n2"}}}}));
  }
  EXPECT_EQ(worker["metadata"]["annotations"][kAnnotationAvoidedNodes], "n1,n2");
  // Pack's pod affinity sits beside the node affinity.
  EXPECT_TRUE(worker["spec"]["affinity"].contains("podAffinity"));
}

TEST(GpuBuilders, NoAvoidanceLeavesTheAffinityAlone) {
  Json worker = BuildWorkerPod(Job(""), 0);
  EXPECT_FALSE(worker["spec"]["affinity"].contains("nodeAffinity"));
  EXPECT_FALSE(worker["metadata"].contains("annotations"));
}

TEST(GpuBuilders, WorkersLearnTheGpuErrorExitCodeAndTheirSlots) {
  Json worker = BuildWorkerPod(Job(""), 0);
  std::map<std::string, std::string> env;
  for (const auto& e : worker["spec"]["containers"][0]["env"])
    if (e.contains("value")) env[e["name"]] = e["value"];
  EXPECT_EQ(env["KHOROVOD_GPU_ERROR_EXIT_CODE"], "121");
  EXPECT_EQ(env["KHOROVOD_SLOTS"], "2") << "slotsPerWorker defaults to the GPU limit";
}

}  // namespace
}  // namespace khorovod::op
