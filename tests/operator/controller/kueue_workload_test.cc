// The Kueue Workload rules (controller/kueue_workload.h) and how an admission
// gates PlanJob, with no API server involved. tests/ecosystem/kueue_test.sh
// runs the same path against Kueue's real controller.
#include "controller/kueue_workload.h"

#include <gtest/gtest.h>

#include "controller/builders.h"
#include "controller/job_plan.h"

namespace khorovod::op {
namespace {

HorovodJob Job(const std::string& extra_labels = R"("kueue.x-k8s.io/queue-name": "lq")",
               const std::string& managed_by = "") {
  std::vector<FieldError> errors;
  Json obj = Json::parse(R"({
      "metadata": {"name": "j", "namespace": "ns", "uid": "u", "labels": {)" +
                         extra_labels + R"(}},
      "spec": {"replicas": 4, "minReplicas": 2, "maxReplicas": 6,
               "worker": {"template": {"spec": {"nodeSelector": {"zone": "a"},
                 "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}}}}})");
  if (!managed_by.empty()) obj["spec"]["managedBy"] = managed_by;
  HorovodJob job = DecodeHorovodJob(obj, errors);
  EXPECT_TRUE(errors.empty()) << JoinErrors(errors);
  return job;
}

Json Admitted(int workers) {
  Json wl = BuildWorkload(Job());
  wl["metadata"]["generation"] = 1;
  wl["status"] = {
      {"admission",
       {{"clusterQueue", "cq"},
        {"podSetAssignments",
         Json::array({{{"name", "worker"},
                       {"count", workers},
                       {"flavors", {{"cpu", "fast"}, {"memory", "fast"}}}},
                      {{"name", "rendezvous"}, {"count", 1}, {"flavors", {{"cpu", "small"}}}}})}}},
      {"conditions", Json::array({{{"type", "QuotaReserved"}, {"status", "True"}},
                                  {{"type", "Admitted"}, {"status", "True"}}})}};
  return wl;
}

TEST(KueueWorkloadTest, OnlyLabelledJobsNotManagedElsewhereAreQueued) {
  EXPECT_TRUE(QueuedByKueue(Job()));
  EXPECT_FALSE(QueuedByKueue(Job(R"("team": "x")")));
  EXPECT_TRUE(QueuedByKueue(Job(R"("kueue.x-k8s.io/queue-name": "lq")", kManagedByKhorovod)));
  EXPECT_FALSE(
      QueuedByKueue(Job(R"("kueue.x-k8s.io/queue-name": "lq")", "kueue.x-k8s.io/multikueue")));
  EXPECT_TRUE(ManagedElsewhere(Job(R"("team": "x")", "example.com/other")));
}

TEST(KueueWorkloadTest, WorkloadRequestsMaxWorkersWithMinCountAndTheRendezvous) {
  Json wl = BuildWorkload(Job());
  EXPECT_EQ(wl["metadata"]["name"], "horovodjob-j");
  EXPECT_EQ(wl["metadata"]["ownerReferences"][0]["uid"], "u");
  EXPECT_TRUE(wl["metadata"]["ownerReferences"][0]["controller"].get<bool>());
  EXPECT_EQ(wl["spec"]["queueName"], "lq");
  const Json& sets = wl["spec"]["podSets"];
  ASSERT_EQ(sets.size(), 2u);
  EXPECT_EQ(sets[0]["name"], "worker");
  EXPECT_EQ(sets[0]["count"], 6);
  EXPECT_EQ(sets[0]["minCount"], 2);
  EXPECT_EQ(sets[0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"], "1");
  EXPECT_EQ(sets[1]["name"], "rendezvous");
  EXPECT_EQ(sets[1]["count"], 1);
  EXPECT_EQ(sets[1]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"], "100m");
}

TEST(KueueWorkloadTest, NonElasticJobHasNoMinCount) {
  std::vector<FieldError> errors;
  HorovodJob job =
      DecodeHorovodJob(Json::parse(R"({"metadata": {"name": "j", "namespace": "ns", "uid": "u",
      "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
      "spec": {"replicas": 3, "worker": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}})"),
                       errors);
  Json wl = BuildWorkload(job);
  EXPECT_EQ(wl["spec"]["podSets"][0]["count"], 3);
  EXPECT_FALSE(wl["spec"]["podSets"][0].contains("minCount"));
}

TEST(KueueWorkloadTest, ReadsAdmissionCountAndFlavors) {
  WorkloadAdmission a = ReadAdmission(Admitted(3), 6);
  EXPECT_TRUE(a.admitted);
  EXPECT_TRUE(a.quota_reserved);
  EXPECT_EQ(a.workers, 3);
  EXPECT_EQ(a.worker_flavors, (std::vector<std::string>{"fast"}));
  EXPECT_EQ(a.rendezvous_flavors, (std::vector<std::string>{"small"}));
}

TEST(KueueWorkloadTest, PendingWorkloadIsNotAdmittedAndSaysWhy) {
  Json wl = BuildWorkload(Job());
  wl["status"]["conditions"] = Json::array(
      {{{"type", "QuotaReserved"}, {"status", "False"}, {"message", "couldn't assign flavors"}}});
  WorkloadAdmission a = ReadAdmission(wl, 6);
  EXPECT_FALSE(a.admitted);
  EXPECT_FALSE(a.quota_reserved);
  EXPECT_NE(a.message.find("couldn't assign flavors"), std::string::npos);
}

TEST(KueueWorkloadTest, EvictedWorkloadStopsTheJobAndGivesQuotaBack) {
  Json wl = Admitted(6);
  wl["status"]["conditions"].push_back(
      {{"type", "Evicted"}, {"status", "True"}, {"message", "Preempted"}});
  WorkloadAdmission a = ReadAdmission(wl, 6);
  EXPECT_FALSE(a.admitted);
  EXPECT_TRUE(a.evicted);
  EXPECT_TRUE(a.quota_reserved);
  Json released = WorkloadWithoutQuota(wl, "2026-11-23T00:00:00Z", a.message);
  EXPECT_FALSE(released["status"].contains("admission"));
  WorkloadAdmission after = ReadAdmission(released, 6);
  EXPECT_FALSE(after.quota_reserved);
  EXPECT_FALSE(after.admitted);
  for (const auto& c : released["status"]["conditions"]) {
    if (c["type"] == "QuotaReserved" || c["type"] == "Admitted") {
      EXPECT_EQ(c["status"], "False") << c.dump();
    }
    if (c["type"] == "QuotaReserved") {
      EXPECT_EQ(c["lastTransitionTime"], "2026-11-23T00:00:00Z");
    }
  }
}

TEST(KueueWorkloadTest, FinishedWorkloadCarriesTheOutcome) {
  Json wl = WorkloadFinished(Admitted(6), false, "2026-11-23T00:00:00Z", "HorovodJob failed");
  EXPECT_TRUE(ReadAdmission(wl, 6).finished);
  EXPECT_EQ(wl["status"]["conditions"].back()["reason"], "Failed");
}

TEST(KueueWorkloadTest, FlavorLabelsAndTolerationsAreMergedOnce) {
  Json spec = Job().spec.worker_template["spec"];
  Json flavor = {{"spec",
                  {{"nodeLabels", {{"pool", "fast"}, {"zone", "b"}}},
                   {"tolerations", Json::array({{{"key", "gpu"}, {"operator", "Exists"}}})}}}};
  ApplyFlavors(spec, {flavor, flavor});
  EXPECT_EQ(spec["nodeSelector"]["pool"], "fast");
  EXPECT_EQ(spec["nodeSelector"]["zone"], "b");
  EXPECT_EQ(spec["tolerations"].size(), 1u);
}

TEST(KueueWorkloadTest, PlanHoldsAQueuedJobUntilAdmittedThenCapsWorkers) {
  HorovodJob job = Job();
  PlanInput in;
  in.job = &job;
  in.now = std::chrono::system_clock::now();
  in.admission = AdmissionGate{false, 0, "waiting for Kueue"};
  JobPlan held = PlanJob(in);
  EXPECT_TRUE(held.create_workers.empty());
  EXPECT_FALSE(held.ensure_rendezvous);
  EXPECT_EQ(held.status.phase, JobPhase::kSuspended);

  job.status = held.status;
  in.admission = AdmissionGate{true, 3, ""};
  JobPlan admitted = PlanJob(in);
  EXPECT_EQ(admitted.create_workers, (std::vector<int>{0, 1, 2}));  // replicas 4, admitted 3
  EXPECT_TRUE(admitted.ensure_rendezvous);
}

}  // namespace
}  // namespace khorovod::op
