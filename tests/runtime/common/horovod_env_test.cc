// MergeHorovodAliases: HOROVOD_* settings become their KHOROVOD_* equivalents,
// ours win, and those without meaning here are reported for a warning.
#include "common/horovod_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "khorovod/config.h"

namespace khorovod {
namespace {

using Env = std::map<std::string, std::string>;

TEST(HorovodEnv, AliasesTranslateIntoTheConfig) {
  Env vars;
  const Env horovod = {{"HOROVOD_FUSION_THRESHOLD", "1048576"},
                       {"HOROVOD_CYCLE_TIME", "2.5"},
                       {"HOROVOD_CACHE_CAPACITY", "7"},
                       {"HOROVOD_GLOO_TIMEOUT_SECONDS", "12"},
                       {"HOROVOD_GPU_OPERATIONS", "NCCL"},
                       {"HOROVOD_TIMELINE", "/tmp/t.json"},
                       {"HOROVOD_STALL_CHECK_TIME_SECONDS", "9"},
                       {"HOROVOD_ELASTIC_TIMEOUT", "30"},
                       {"HOROVOD_GLOO_IFACE", "eth1"}};
  EXPECT_TRUE(MergeHorovodAliases(&vars, horovod).empty());
  StatusOr<Config> c = Config::FromMap(vars);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->fusion_threshold_bytes, 1048576u);
  EXPECT_EQ(c->cycle_time.count(), 2500);
  EXPECT_EQ(c->cache_capacity, 7u);
  EXPECT_EQ(c->transport_timeout.count(), 12'000);
  EXPECT_EQ(c->gpu_backend, "nccl");
  EXPECT_EQ(c->timeline_path, "/tmp/t.json");
  EXPECT_EQ(c->stall_warning_time.count(), 9'000);
  EXPECT_EQ(c->elastic_timeout.count(), 30'000);
  EXPECT_EQ(c->network_interface, "eth1");
}

TEST(HorovodEnv, StallShutdownAndDisableAreHonoured) {
  Env vars;
  EXPECT_TRUE(MergeHorovodAliases(&vars, {{"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "5"},
                                          {"HOROVOD_STALL_CHECK_DISABLE", "1"}})
                  .empty());
  StatusOr<Config> c = Config::FromMap(vars);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->stall_shutdown_time.count(), 5'000);
  EXPECT_FALSE(c->stall_check);
}

TEST(HorovodEnv, OursWin) {
  Env vars = {{"KHOROVOD_CACHE_CAPACITY", "3"}};
  MergeHorovodAliases(&vars, {{"HOROVOD_CACHE_CAPACITY", "7"}});
  EXPECT_EQ(vars.at("KHOROVOD_CACHE_CAPACITY"), "3");
}

TEST(HorovodEnv, SettingsWithoutMeaningAreReportedLaunchVariablesAreNot) {
  Env vars;
  const auto unknown = MergeHorovodAliases(
      &vars,
      {{"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"}, {"HOROVOD_AUTOTUNE", "1"}, {"HOROVOD_RANK", "0"}});
  EXPECT_EQ(unknown,
            (std::vector<std::string>{"HOROVOD_AUTOTUNE", "HOROVOD_HIERARCHICAL_ALLREDUCE"}));
  EXPECT_TRUE(vars.empty());
}

TEST(HorovodEnv, MalformedAliasIsRejectedUnderOurName) {
  Env vars;
  MergeHorovodAliases(&vars, {{"HOROVOD_CYCLE_TIME", "fast"}});
  StatusOr<Config> c = Config::FromMap(vars);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("KHOROVOD_CYCLE_TIME"), std::string::npos);
}

}  // namespace
}  // namespace khorovod
