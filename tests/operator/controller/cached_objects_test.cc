// The pod cache keeps what the reconciler reads and drops the rest.
#include "controller/cached_objects.h"

#include <gtest/gtest.h>

#include "controller/builders.h"
#include "controller/pod_view.h"

namespace khorovod::op {
namespace {

Json FullPod() {
  return Json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {
      "name": "job-worker-3", "namespace": "ns", "uid": "u-3", "resourceVersion": "42",
      "labels": {"khorovod.dev/job-name": "job", "khorovod.dev/role": "worker", "khorovod.dev/worker-index": "3"},
      "annotations": {"big": "drop me"},
      "deletionTimestamp": "2026-11-23T00:00:00Z",
      "ownerReferences": [
        {"apiVersion": "khorovod.dev/v1alpha1", "kind": "HorovodJob", "name": "job", "uid": "j-1", "controller": true},
        {"apiVersion": "v1", "kind": "Other", "name": "x", "uid": "o-1"}],
      "managedFields": [{"manager": "kube-scheduler", "fieldsV1": {"f:status": {}}}]
    },
    "spec": {"containers": [{"name": "trainer", "image": "i", "env": [{"name": "A", "value": "1"}]}], "nodeName": "n1"},
    "status": {
      "phase": "Failed", "reason": "Evicted", "podIP": "10.0.0.3", "hostIP": "10.1.0.1", "message": "long text",
      "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True", "lastTransitionTime": "t"}],
      "containerStatuses": [{"name": "trainer", "image": "i", "imageID": "x", "ready": false, "restartCount": 0,
                             "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled", "startedAt": "t"}}}]
    }
  })");
}

TEST(CachedPod, ThePodViewIsTheSameThroughTheTrim) {
  const Json full = FullPod();
  const Json kept = CachedPod(full);
  PodView a = View(full), b = View(kept);
  EXPECT_EQ(a.index, b.index);
  EXPECT_EQ(b.index, 3);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.uid, b.uid);
  EXPECT_EQ(a.phase, b.phase);
  EXPECT_EQ(a.reason, b.reason);
  EXPECT_EQ(a.deleting, b.deleting);
  EXPECT_TRUE(b.deleting);
  EXPECT_EQ(a.ready, b.ready);
  EXPECT_TRUE(b.ready);
  EXPECT_EQ(a.exit_code, b.exit_code);
  EXPECT_EQ(b.exit_code, 137);
  EXPECT_EQ(a.node, b.node);
  EXPECT_EQ(b.node, "n1");
}

// What the GPU phases read: the scheduler's reason, the devices reported
// Unhealthy (ResourceHealthStatus) and the nodes a worker's affinity avoids.
TEST(CachedPod, GpuFactsSurviveTheTrim) {
  const Json full = Json::parse(R"({
    "metadata": {"name": "job-worker-0", "uid": "u",
                 "annotations": {"khorovod.dev/avoided-nodes": "n1,n2", "other": "x"}},
    "spec": {"containers": [{"name": "trainer"}]},
    "status": {"phase": "Pending",
      "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                      "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}],
      "containerStatuses": [{"name": "trainer", "state": {"running": {}},
        "allocatedResourcesStatus": [{"name": "nvidia.com/gpu", "resources": [
          {"resourceID": "GPU-sim-0", "health": "Healthy"}, {"resourceID": "GPU-sim-1", "health": "Unhealthy"}]}]}]}
  })");
  const Json kept = CachedPod(full);
  PodView a = View(full), b = View(kept);
  EXPECT_EQ(b.unschedulable, "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.");
  EXPECT_EQ(a.unschedulable, b.unschedulable);
  EXPECT_EQ(b.unhealthy_gpus, std::vector<std::string>{"GPU-sim-1"});
  EXPECT_EQ(a.unhealthy_gpus, b.unhealthy_gpus);
  EXPECT_EQ(b.avoided_nodes, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_TRUE(b.gpu_failed());
  EXPECT_FALSE(kept["metadata"]["annotations"].contains("other"));
  EXPECT_FALSE(kept.contains("spec"));  // no nodeName yet: nothing of the spec is kept
}

TEST(CachedPod, KeepsOwnershipAndPodIpAndDropsTheRest) {
  const Json kept = CachedPod(FullPod());
  EXPECT_EQ(kept["status"]["podIP"], "10.0.0.3");
  EXPECT_EQ(kept["metadata"]["namespace"], "ns");
  ASSERT_EQ(kept["metadata"]["ownerReferences"].size(), 1u);
  EXPECT_EQ(kept["metadata"]["ownerReferences"][0]["uid"], "j-1");
  EXPECT_EQ(kept["spec"], Json({{"nodeName", "n1"}}));
  EXPECT_FALSE(kept["metadata"].contains("managedFields"));
  EXPECT_FALSE(kept["metadata"].contains("annotations"));
  EXPECT_FALSE(kept["status"].contains("message"));
  ASSERT_EQ(kept["status"]["conditions"].size(), 1u);
  EXPECT_EQ(kept["status"]["conditions"][0], Json({{"type", "Ready"}, {"status", "True"}}));
  EXPECT_EQ(kept["status"]["containerStatuses"][0],
            Json({{"name", "trainer"}, {"state", {{"terminated", {{"exitCode", 137}}}}}}));
}

TEST(CachedPod, APodWithoutStatusOrLabelsStaysReadable) {
  const Json kept = CachedPod(Json::parse(R"({"metadata": {"name": "p", "namespace": "ns"}})"));
  PodView v = View(kept);
  EXPECT_EQ(v.name, "p");
  EXPECT_EQ(v.index, -1);
  EXPECT_EQ(v.phase, "Pending");
  EXPECT_EQ(v.exit_code, -1);
  EXPECT_FALSE(v.ready);
}

TEST(CachedService, KeepsOnlyMetadataThatIdentifiesIt) {
  Json svc = Json::parse(R"({"metadata": {"name": "s", "namespace": "ns", "uid": "u",
    "ownerReferences": [{"kind": "HorovodJob", "name": "job", "uid": "j", "controller": true}]},
    "spec": {"clusterIP": "None", "ports": [{"port": 1}]}})");
  Json kept = CachedService(svc);
  EXPECT_EQ(kept["metadata"]["name"], "s");
  EXPECT_EQ(kept["metadata"]["ownerReferences"][0]["name"], "job");
  EXPECT_FALSE(kept.contains("spec"));
}

}  // namespace
}  // namespace khorovod::op
