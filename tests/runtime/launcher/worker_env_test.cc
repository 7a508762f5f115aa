#include "launcher/worker_env.h"

#include <gtest/gtest.h>

namespace khorovod::launcher {
namespace {

using Env = std::vector<std::string>;

TEST(WorkerEnvTest, SingleHostContract) {
  const auto vars = ContractVariables(SingleHostParams(2, 4, "/tmp/s", "job", "127.0.0.1"));
  EXPECT_EQ(vars, (std::vector<EnvVar>{{"KHOROVOD_RANK", "2"},
                                       {"KHOROVOD_SIZE", "4"},
                                       {"KHOROVOD_LOCAL_RANK", "2"},
                                       {"KHOROVOD_LOCAL_SIZE", "4"},
                                       {"KHOROVOD_CROSS_RANK", "0"},
                                       {"KHOROVOD_CROSS_SIZE", "1"},
                                       {"KHOROVOD_HOSTNAME", "127.0.0.1"},
                                       {"KHOROVOD_STORE_PATH", "/tmp/s"},
                                       {"KHOROVOD_JOB_ID", "job"}}));
  for (const auto& [name, value] : vars) EXPECT_TRUE(IsContractVariable(name)) << name;
  EXPECT_FALSE(IsContractVariable("KHOROVOD_OTHER"));
  EXPECT_FALSE(IsContractVariable("KHOROVOD_RANKX"));
}

TEST(WorkerEnvTest, HorovodVariablesAsGlooRunExportsThem) {
  const auto vars = HorovodVariables(SingleHostParams(2, 4, "/tmp/s", "job", "127.0.0.1"));
  EXPECT_EQ(vars, (std::vector<EnvVar>{{"HOROVOD_RANK", "2"},
                                       {"HOROVOD_SIZE", "4"},
                                       {"HOROVOD_LOCAL_RANK", "2"},
                                       {"HOROVOD_LOCAL_SIZE", "4"},
                                       {"HOROVOD_CROSS_RANK", "0"},
                                       {"HOROVOD_CROSS_SIZE", "1"},
                                       {"HOROVOD_HOSTNAME", "127.0.0.1"}}));
  EXPECT_EQ(ElasticHorovodVariables("h"),
            (std::vector<EnvVar>{{"HOROVOD_HOSTNAME", "h"}, {"HOROVOD_ELASTIC", "1"}}));
  EXPECT_EQ(ElasticHorovodVariables("h", Placement{3, 4, 1, 2, 1, 2}),
            (std::vector<EnvVar>{{"HOROVOD_RANK", "3"},
                                 {"HOROVOD_SIZE", "4"},
                                 {"HOROVOD_LOCAL_RANK", "1"},
                                 {"HOROVOD_LOCAL_SIZE", "2"},
                                 {"HOROVOD_CROSS_RANK", "1"},
                                 {"HOROVOD_CROSS_SIZE", "2"},
                                 {"HOROVOD_HOSTNAME", "h"},
                                 {"HOROVOD_ELASTIC", "1"}}));
}

TEST(WorkerEnvTest, MergeReplacesAndAppends) {
  const Env base{"PATH=/bin", "KHOROVOD_RANK=9", "HOME=/root", "A=old"};
  const Env merged = MergeEnvironment(base, {{"A", "new"}, {"KHOROVOD_RANK", "0"}, {"B", "x=y"}});
  EXPECT_EQ(merged, (Env{"PATH=/bin", "HOME=/root", "A=new", "KHOROVOD_RANK=0", "B=x=y"}));
}

TEST(WorkerEnvTest, MergeLastOverrideWins) {
  EXPECT_EQ(MergeEnvironment({"A=0"}, {{"A", "1"}, {"B", "1"}, {"A", "2"}}), (Env{"B=1", "A=2"}));
}

TEST(WorkerEnvTest, MergeMatchesWholeNames) {
  EXPECT_EQ(MergeEnvironment({"AB=1", "A=2"}, {{"A", "3"}}), (Env{"AB=1", "A=3"}));
}

TEST(WorkerEnvTest, ResolveExtraEnv) {
  const Env base{"HOME=/root", "EMPTY=", "EQ=a=b"};
  const ResolvedExtraEnv r = ResolveExtraEnv({{"FOO", "1"},
                                              {"HOME", std::nullopt},
                                              {"EMPTY", std::nullopt},
                                              {"EQ", std::nullopt},
                                              {"MISSING", std::nullopt},
                                              {"MISSING", std::nullopt},
                                              {"FOO", "2"}},
                                             base);
  EXPECT_EQ(r.vars,
            (std::vector<EnvVar>{{"FOO", "2"}, {"HOME", "/root"}, {"EMPTY", ""}, {"EQ", "a=b"}}));
  EXPECT_EQ(r.missing, (std::vector<std::string>{"MISSING"}));
}

TEST(WorkerEnvTest, CurrentEnvironmentSeesSetenv) {
  ASSERT_EQ(::setenv("KHOROVOD_LAUNCHER_TEST_VAR", "v=1", 1), 0);
  const Env env = CurrentEnvironment();
  EXPECT_NE(std::find(env.begin(), env.end(), "KHOROVOD_LAUNCHER_TEST_VAR=v=1"), env.end());
  ::unsetenv("KHOROVOD_LAUNCHER_TEST_VAR");
}

}  // namespace
}  // namespace khorovod::launcher
