// GPU defaults and validation of HorovodJob: slotsPerWorker follows the
// worker container's nvidia.com/gpu limit, a contradicting value is refused
// with both numbers, and GPU jobs pack by default.
#include <gtest/gtest.h>

#include "api/horovodjob.h"

namespace khorovod::op {
namespace {

HorovodJob Decode(const std::string& slots, const std::string& gpu_limit,
                  const std::string& scheduling = "{}") {
  std::string resources =
      gpu_limit.empty() ? "{}" : R"({"limits": {"nvidia.com/gpu": )" + gpu_limit + "}}";
  std::string spec =
      R"({"replicas": 2,)" + (slots.empty() ? "" : R"("slotsPerWorker": )" + slots + ",") +
      R"("schedulingPolicy": )" + scheduling + R"(, "worker": {"template": {"spec": {"containers": [
                       {"name": "trainer", "image": "i", "resources": )" +
      resources + "}]}}}}";
  std::vector<FieldError> errors;
  HorovodJob job =
      DecodeHorovodJob(Json::parse(R"({"metadata": {"name": "j"}, "spec": )" + spec + "}"), errors);
  EXPECT_TRUE(errors.empty()) << JoinErrors(errors);
  return job;
}

TEST(GpuDefaults, SlotsPerWorkerDefaultsToTheGpuLimit) {
  HorovodJob job = Decode("", "2");
  EXPECT_EQ(job.spec.gpus_per_worker, 2);
  EXPECT_EQ(job.spec.slots_per_worker, 2);
  EXPECT_FALSE(job.spec.slots_per_worker_set);
  EXPECT_TRUE(Validate(job.spec).empty()) << JoinErrors(Validate(job.spec));
}

TEST(GpuDefaults, AQuantityStringCountsToo) {
  HorovodJob job = Decode("", "\"4\"");
  EXPECT_EQ(job.spec.gpus_per_worker, 4);
  EXPECT_EQ(job.spec.slots_per_worker, 4);
}

TEST(GpuDefaults, ACpuJobKeepsOneSlot) {
  HorovodJob job = Decode("", "");
  EXPECT_EQ(job.spec.gpus_per_worker, 0);
  EXPECT_EQ(job.spec.slots_per_worker, 1);
  EXPECT_EQ(EffectivePlacement(job.spec), Placement::kSpread)
      << "a lost node should cost a CPU job few ranks";
}

TEST(GpuDefaults, AnAgreeingSlotsPerWorkerIsAccepted) {
  HorovodJob job = Decode("4", "4");
  EXPECT_TRUE(job.spec.slots_per_worker_set);
  EXPECT_TRUE(Validate(job.spec).empty());
}

TEST(GpuValidation, AContradictingSlotsPerWorkerNamesBothNumbers) {
  HorovodJob job = Decode("3", "2");
  auto errors = Validate(job.spec);
  ASSERT_EQ(errors.size(), 1u) << JoinErrors(errors);
  EXPECT_EQ(errors[0].field, "spec.slotsPerWorker");
  EXPECT_EQ(errors[0].message,
            "3 contradicts the nvidia.com/gpu limit 2 of the first worker container: one training "
            "process runs per "
            "GPU; leave slotsPerWorker out or make the two equal");
}

TEST(GpuValidation, AFractionalGpuLimitIsRefused) {
  HorovodJob job = Decode("", "\"500m\"");
  auto errors = Validate(job.spec);
  ASSERT_EQ(errors.size(), 1u) << JoinErrors(errors);
  EXPECT_EQ(errors[0].message, "must be a whole number of GPUs");
}

TEST(GpuValidation, ANegativeCooldownIsRefused) {
  HorovodJob job = Decode("", "1", R"({"nodeCooldownSeconds": -1})");
  auto errors = Validate(job.spec);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "spec.schedulingPolicy.nodeCooldownSeconds");
}

TEST(GpuPlacement, GpuJobsPackByDefaultAndTheFieldWins) {
  EXPECT_EQ(EffectivePlacement(Decode("", "1").spec), Placement::kPack);
  EXPECT_EQ(EffectivePlacement(Decode("", "1", R"({"placement": "Spread"})").spec),
            Placement::kSpread);
  EXPECT_EQ(EffectivePlacement(Decode("", "1", R"({"placement": "None"})").spec), Placement::kNone);
  EXPECT_EQ(EffectivePlacement(Decode("", "", R"({"placement": "Pack"})").spec), Placement::kPack);
  EXPECT_EQ(Decode("", "1").spec.scheduling.node_cooldown_seconds, 600);
}

TEST(GpuPlacement, AnUnknownPlacementIsADecodeError) {
  std::vector<FieldError> errors;
  DecodeHorovodJob(Json::parse(R"({"spec": {"schedulingPolicy": {"placement": "Anywhere"},
    "worker": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}})"),
                   errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "spec.schedulingPolicy.placement");
}

TEST(GpuStatus, GpuFieldsAndAvoidedNodesRoundTrip) {
  HorovodJobStatus st;
  st.gpus = 2;
  st.gpus_wanted = 4;
  st.avoided_nodes = {{"n1", "2026-11-26T00:00:00Z", "GPU failure"}};
  Json encoded = EncodeStatus(st);
  EXPECT_EQ(encoded["gpus"], 2);
  EXPECT_EQ(encoded["gpusWanted"], 4);
  HorovodJobStatus back = DecodeStatus(encoded);
  EXPECT_EQ(back.gpus, 2);
  EXPECT_EQ(back.gpus_wanted, 4);
  ASSERT_EQ(back.avoided_nodes.size(), 1u);
  EXPECT_EQ(back.avoided_nodes[0].node, "n1");
  EXPECT_EQ(back.avoided_nodes[0].until, "2026-11-26T00:00:00Z");
  EXPECT_FALSE(EncodeStatus(HorovodJobStatus{}).contains("gpus"))
      << "a CPU job's status has no GPU fields";
}

}  // namespace
}  // namespace khorovod::op
