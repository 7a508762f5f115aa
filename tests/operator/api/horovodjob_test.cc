// Decoding, defaults and validation of HorovodJob specs.
#include "api/horovodjob.h"

#include <gtest/gtest.h>

namespace khorovod::op {
namespace {

Json MinimalJob() {
  return Json::parse(R"({
    "metadata": {"name": "j", "namespace": "ns", "uid": "u1", "generation": 3},
    "spec": {"replicas": 4, "minReplicas": 2, "maxReplicas": 6,
             "worker": {"template": {"spec": {"containers": [{"name": "c", "image": "img:1"}]}}}}
  })");
}

TEST(HorovodJobDecode, ReadsFieldsAndAppliesDefaults) {
  std::vector<FieldError> errors;
  HorovodJob job = DecodeHorovodJob(MinimalJob(), errors);
  EXPECT_TRUE(errors.empty()) << JoinErrors(errors);
  EXPECT_EQ(job.name, "j");
  EXPECT_EQ(job.namespace_, "ns");
  EXPECT_EQ(job.generation, 3);
  EXPECT_EQ(job.spec.replicas, 4);
  EXPECT_EQ(job.spec.min_replicas, 2);
  EXPECT_EQ(job.spec.max_replicas, 6);
  EXPECT_EQ(job.spec.slots_per_worker, 1);
  EXPECT_EQ(job.spec.rendezvous.port, 29400);
  EXPECT_EQ(job.spec.rendezvous.image, "img:1") << "defaults to the first worker container's image";
  EXPECT_EQ(job.spec.run_policy.backoff_limit, 6);
  EXPECT_EQ(job.spec.run_policy.clean_pod_policy, CleanPodPolicy::kRunning);
  EXPECT_EQ(job.spec.run_policy.restart_policy, RestartPolicy::kOnFailure);
  EXPECT_FALSE(job.spec.run_policy.suspend);
  EXPECT_EQ(job.spec.local_ranks, LocalRanks::kPod);
  EXPECT_TRUE(Validate(job.spec).empty()) << JoinErrors(Validate(job.spec));
}

TEST(HorovodJobDecode, LocalRanksByNode) {
  Json j = MinimalJob();
  j["spec"]["localRanks"] = "Node";
  std::vector<FieldError> errors;
  EXPECT_EQ(DecodeHorovodJob(j, errors).spec.local_ranks, LocalRanks::kNode);
  EXPECT_TRUE(errors.empty()) << JoinErrors(errors);
}

TEST(HorovodJobDecode, UnsetBoundsFollowReplicas) {
  Json j = MinimalJob();
  j["spec"].erase("minReplicas");
  j["spec"].erase("maxReplicas");
  std::vector<FieldError> errors;
  HorovodJob job = DecodeHorovodJob(j, errors);
  EXPECT_EQ(job.spec.min_replicas, 4);
  EXPECT_EQ(job.spec.max_replicas, 4);
  EXPECT_TRUE(Validate(job).empty()) << "replicas: 4 alone runs: " << JoinErrors(Validate(job));
  j["spec"]["maxReplicas"] = 8;  // only one bound given: the other follows replicas
  job = DecodeHorovodJob(j, errors);
  EXPECT_EQ(job.spec.min_replicas, 4);
  EXPECT_EQ(job.spec.max_replicas, 8);
}

TEST(HorovodJobDecode, WrongTypesAreFieldErrorsNotExceptions) {
  Json j = MinimalJob();
  j["spec"]["replicas"] = "four";
  j["spec"]["runPolicy"] = {{"cleanPodPolicy", "Sometimes"}, {"backoffLimit", Json::array()}};
  std::vector<FieldError> errors;
  HorovodJob job = DecodeHorovodJob(j, errors);
  ASSERT_EQ(errors.size(), 3u) << JoinErrors(errors);
  EXPECT_EQ(errors[0].field, "spec.replicas");
  EXPECT_NE(JoinErrors(errors).find("Sometimes"), std::string::npos);
  EXPECT_EQ(job.spec.run_policy.backoff_limit, 6) << "a bad field keeps its default";
}

TEST(HorovodJobDecode, GarbageObjectDoesNotThrow) {
  std::vector<FieldError> errors;
  for (const char* text : {"{}", R"({"spec": 5})", R"({"spec": {"worker": []}})", "[]", "null"}) {
    Json j = Json::parse(text);
    EXPECT_NO_THROW({
      HorovodJob job = DecodeHorovodJob(j, errors);
      (void)Validate(job.spec);
    }) << text;
  }
}

struct ValidationCase {
  const char* name;
  const char* patch;  // JSON merge-patch applied to MinimalJob()
  const char* field;  // expected failing field
};

class HorovodJobValidation : public ::testing::TestWithParam<ValidationCase> {};

TEST_P(HorovodJobValidation, RejectsWithFieldAndMessage) {
  Json j = MinimalJob();
  j.merge_patch(Json::parse(GetParam().patch));
  std::vector<FieldError> errors;
  HorovodJob job = DecodeHorovodJob(j, errors);
  auto v = Validate(job.spec);
  errors.insert(errors.end(), v.begin(), v.end());
  ASSERT_FALSE(errors.empty()) << GetParam().name;
  bool found = false;
  for (const auto& e : errors) found |= e.field == GetParam().field;
  EXPECT_TRUE(found) << GetParam().name << ": " << JoinErrors(errors);
}

INSTANTIATE_TEST_SUITE_P(
    Table, HorovodJobValidation,
    ::testing::Values(
        ValidationCase{"replicas above max", R"({"spec": {"replicas": 7}})", "spec.replicas"},
        ValidationCase{"replicas below min", R"({"spec": {"replicas": 1}})", "spec.replicas"},
        ValidationCase{"min above max", R"({"spec": {"minReplicas": 7, "replicas": 7}})",
                       "spec.maxReplicas"},
        ValidationCase{"min zero", R"({"spec": {"minReplicas": 0}})", "spec.minReplicas"},
        ValidationCase{"no containers",
                       R"({"spec": {"worker": {"template": {"spec": {"containers": []}}}}})",
                       "spec.worker.template.spec.containers"},
        ValidationCase{
            "no image",
            R"({"spec": {"worker": {"template": {"spec": {"containers": [{"name": "c"}]}}}}})",
            "spec.worker.template.spec.containers[0].image"},
        ValidationCase{
            "duplicate container",
            R"({"spec": {"worker": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}, {"name": "c", "image": "i"}]}}}}})",
            "spec.worker.template.spec.containers[1].name"},
        ValidationCase{"slots zero", R"({"spec": {"slotsPerWorker": 0}})", "spec.slotsPerWorker"},
        ValidationCase{"unknown local ranks", R"({"spec": {"localRanks": "Rack"}})",
                       "spec.localRanks"},
        ValidationCase{"slots too many", R"({"spec": {"slotsPerWorker": 65}})",
                       "spec.slotsPerWorker"},
        ValidationCase{"port zero", R"({"spec": {"rendezvous": {"port": 0}}})",
                       "spec.rendezvous.port"},
        ValidationCase{"heartbeat tiny", R"({"spec": {"rendezvous": {"heartbeatTimeoutMs": 5}}})",
                       "spec.rendezvous.heartbeatTimeoutMs"},
        ValidationCase{"negative backoff", R"({"spec": {"runPolicy": {"backoffLimit": -1}}})",
                       "spec.runPolicy.backoffLimit"},
        ValidationCase{"zero deadline", R"({"spec": {"runPolicy": {"activeDeadlineSeconds": 0}}})",
                       "spec.runPolicy.activeDeadlineSeconds"},
        ValidationCase{"bad restart policy",
                       R"({"spec": {"runPolicy": {"restartPolicy": "Always"}}})",
                       "spec.runPolicy.restartPolicy"},
        ValidationCase{"minAvailable above max",
                       R"({"spec": {"schedulingPolicy": {"minAvailable": 9}}})",
                       "spec.schedulingPolicy.minAvailable"}),
    [](const ::testing::TestParamInfo<ValidationCase>& info) {
      std::string n = info.param.name;
      for (auto& c : n)
        if (!isalnum(static_cast<unsigned char>(c))) c = '_';
      return n;
    });

TEST(HorovodJobStatus, RoundTrips) {
  HorovodJobStatus s;
  s.phase = JobPhase::kRunning;
  s.replicas = 4;
  s.ready_replicas = 3;
  s.restart_count = 2;
  s.selector = "a=b";
  s.start_time = "2026-11-22T12:00:00Z";
  s.rendezvous_generation = 5;
  s.counted_failures = {"pod-uid-1"};
  s.conditions.push_back({"Running", "True", "WorkersReady", "3 ready", "2026-11-22T12:00:01Z"});
  HorovodJobStatus back = DecodeStatus(EncodeStatus(s));
  EXPECT_EQ(EncodeStatus(back), EncodeStatus(s));
  EXPECT_EQ(back.counted_failures, s.counted_failures);
  EXPECT_EQ(EncodeStatus(s)["phase"], "Running");
}

TEST(JobPhase, NamesRoundTripAndUnknownNamesAreRefused) {
  for (JobPhase p : kJobPhases) EXPECT_EQ(ParseJobPhase(ToString(p)), p) << ToString(p);
  EXPECT_EQ(ParseJobPhase("Pending"), std::nullopt);
  EXPECT_EQ(DecodeStatus(Json{{"phase", "Exploded"}}).phase, JobPhase::kNone)
      << "status is tolerated, not trusted";
  EXPECT_TRUE(IsFinished(JobPhase::kSucceeded) && IsFinished(JobPhase::kFailed));
  EXPECT_FALSE(IsFinished(JobPhase::kRunning) || IsFinished(JobPhase::kSuspended));
}

TEST(HorovodJobValidateName, AcceptsWhatItsDerivedNamesAllow) {
  EXPECT_EQ(kMaxJobNameLength, 51u) << "63 - len(\"-worker-9999\")";
  EXPECT_TRUE(ValidateName("mlp").empty());
  EXPECT_TRUE(ValidateName("a1-b2").empty());
  const std::string longest(kMaxJobNameLength, 'a');
  EXPECT_TRUE(ValidateName(longest).empty());
  // The longest accepted name still gives valid DNS labels for every derived name.
  EXPECT_LE((longest + "-worker-9999").size(), 63u);
  EXPECT_LE((longest + "-rendezvous").size(), 63u);
  for (const std::string& bad :
       {std::string(kMaxJobNameLength + 1, 'a'), std::string("1job"), std::string("a.b"),
        std::string("job-"), std::string("Job"), std::string("")}) {
    auto errors = ValidateName(bad);
    ASSERT_FALSE(errors.empty()) << bad;
    EXPECT_EQ(errors[0].field, "metadata.name");
  }
  EXPECT_NE(JoinErrors(ValidateName(std::string(60, 'a'))).find("at most 51 characters"),
            std::string::npos);
}

}  // namespace
}  // namespace khorovod::op
