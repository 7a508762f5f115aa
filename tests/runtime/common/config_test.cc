// Config::FromMap: defaults, every KHOROVOD_* variable, and rejection of
// malformed values with the variable named in the message.
#include "khorovod/config.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "test_util.h"

namespace khorovod {
namespace {

using Env = std::map<std::string, std::string>;
using testing::HasSubstr;

// A valid two-rank environment that a test then modifies.
Env TwoRanks() {
  return {{"KHOROVOD_RANK", "1"}, {"KHOROVOD_SIZE", "2"}, {"KHOROVOD_STORE_PATH", "/tmp/store"}};
}

void ExpectRejected(const Env& env, const std::string& variable) {
  StatusOr<Config> c = Config::FromMap(env);
  ASSERT_FALSE(c.ok()) << variable;
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status();
  EXPECT_TRUE(HasSubstr(c.status().message(), variable));
}

TEST(Config, DefaultsFromAnEmptyMap) {
  StatusOr<Config> c = Config::FromMap({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rank, 0);
  EXPECT_EQ(c->size, 1);
  EXPECT_EQ(c->local_rank, 0);
  EXPECT_EQ(c->local_size, 1);
  EXPECT_EQ(c->cross_rank, 0);
  EXPECT_EQ(c->cross_size, 1);
  EXPECT_EQ(c->store_path, "");
  EXPECT_EQ(c->job_id, "khorovod");
  EXPECT_EQ(c->hostname, "127.0.0.1");
  EXPECT_EQ(c->fusion_threshold_bytes, size_t{134217728});
  EXPECT_EQ(c->cycle_time, std::chrono::microseconds(1000));
  EXPECT_EQ(c->cache_capacity, size_t{1024});
  EXPECT_EQ(c->stall_warning_time, std::chrono::seconds(60));
  EXPECT_TRUE(c->stall_check);
  EXPECT_EQ(c->stall_shutdown_time.count(), 0) << "Horovod's default: never shut down on a stall";
  EXPECT_EQ(c->transport_timeout, std::chrono::seconds(30));
  EXPECT_EQ(c->cpu_backend, "auto");
  EXPECT_TRUE(c->Validate().ok());
}

TEST(Config, EveryVariableIsParsed) {
  Env env = {{"KHOROVOD_RANK", "5"},
             {"KHOROVOD_SIZE", "8"},
             {"KHOROVOD_LOCAL_RANK", "1"},
             {"KHOROVOD_LOCAL_SIZE", "4"},
             {"KHOROVOD_CROSS_RANK", "1"},
             {"KHOROVOD_CROSS_SIZE", "2"},
             {"KHOROVOD_STORE_PATH", "/shared/rdzv"},
             {"KHOROVOD_JOB_ID", "job-42"},
             {"KHOROVOD_HOSTNAME", "10.0.0.7"},
             {"KHOROVOD_FUSION_THRESHOLD", "0"},
             {"KHOROVOD_CYCLE_TIME", "2.5"},
             {"KHOROVOD_CACHE_CAPACITY", "0"},
             {"KHOROVOD_STALL_CHECK_TIME_SECONDS", "1.5"},
             {"KHOROVOD_TIMEOUT_SECONDS", "7"},
             {"KHOROVOD_CPU_OPERATIONS", "other"},
             {"UNRELATED", "x"}};
  StatusOr<Config> c = Config::FromMap(env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rank, 5);
  EXPECT_EQ(c->size, 8);
  EXPECT_EQ(c->local_rank, 1);
  EXPECT_EQ(c->local_size, 4);
  EXPECT_EQ(c->cross_rank, 1);
  EXPECT_EQ(c->cross_size, 2);
  EXPECT_EQ(c->store_path, "/shared/rdzv");
  EXPECT_EQ(c->job_id, "job-42");
  EXPECT_EQ(c->hostname, "10.0.0.7");
  EXPECT_EQ(c->fusion_threshold_bytes, size_t{0});
  EXPECT_EQ(c->cycle_time, std::chrono::microseconds(2500));
  EXPECT_EQ(c->cache_capacity, size_t{0});
  EXPECT_EQ(c->stall_warning_time, std::chrono::milliseconds(1500));
  EXPECT_EQ(c->transport_timeout, std::chrono::seconds(7));
  EXPECT_EQ(c->cpu_backend, "other");
}

TEST(Config, StallCheckVariables) {
  Env env = TwoRanks();
  env["KHOROVOD_STALL_CHECK_TIME_SECONDS"] = "2";
  env["KHOROVOD_STALL_SHUTDOWN_TIME_SECONDS"] = "5.5";
  env["KHOROVOD_STALL_CHECK_DISABLE"] = "0";
  StatusOr<Config> c = Config::FromMap(env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->stall_check);
  EXPECT_EQ(c->stall_warning_time, std::chrono::seconds(2));
  EXPECT_EQ(c->stall_shutdown_time, std::chrono::milliseconds(5500));
  for (const char* yes : {"1", "true", "YES", "on"}) {
    env["KHOROVOD_STALL_CHECK_DISABLE"] = yes;
    c = Config::FromMap(env);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_FALSE(c->stall_check) << yes;
  }
  env["KHOROVOD_STALL_CHECK_DISABLE"] = "maybe";
  EXPECT_FALSE(Config::FromMap(env).ok());
  env["KHOROVOD_STALL_CHECK_DISABLE"] = "0";
  env["KHOROVOD_STALL_SHUTDOWN_TIME_SECONDS"] = "-1";
  EXPECT_FALSE(Config::FromMap(env).ok());
}

TEST(Config, LocalRankAndSizeDefaultToGlobalOnes) {
  StatusOr<Config> c = Config::FromMap(TwoRanks());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->local_rank, 1);
  EXPECT_EQ(c->local_size, 2);
  EXPECT_EQ(c->cross_rank, 0);
  EXPECT_EQ(c->cross_size, 1);
}

TEST(Config, CycleTimeAcceptsFractionalMilliseconds) {
  const std::pair<const char*, int64_t> cases[] = {
      {"0.25", 250}, {"0", 0}, {"1", 1000}, {"0.0015", 2}, {"1e1", 10'000}, {"10000", 10'000'000}};
  for (auto [text, micros] : cases) {
    StatusOr<Config> c = Config::FromMap({{"KHOROVOD_CYCLE_TIME", text}});
    ASSERT_TRUE(c.ok()) << text << ": " << c.status();
    EXPECT_EQ(c->cycle_time, std::chrono::microseconds(micros)) << text;
  }
}

TEST(Config, EmptyValueMeansUnset) {
  StatusOr<Config> c = Config::FromMap({{"KHOROVOD_SIZE", ""}, {"KHOROVOD_JOB_ID", ""}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->size, 1);
  EXPECT_EQ(c->job_id, "khorovod");
}

TEST(Config, LargestAcceptedValues) {
  Env env = {{"KHOROVOD_FUSION_THRESHOLD", "1099511627776"},  // 2^40
             {"KHOROVOD_CACHE_CAPACITY", "1048576"}};
  StatusOr<Config> c = Config::FromMap(env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->fusion_threshold_bytes, size_t{1} << 40);
  EXPECT_EQ(c->cache_capacity, size_t{1} << 20);
}

const char* const kIntegerVariables[] = {"KHOROVOD_RANK",
                                         "KHOROVOD_SIZE",
                                         "KHOROVOD_LOCAL_RANK",
                                         "KHOROVOD_LOCAL_SIZE",
                                         "KHOROVOD_CROSS_RANK",
                                         "KHOROVOD_CROSS_SIZE",
                                         "KHOROVOD_FUSION_THRESHOLD",
                                         "KHOROVOD_CACHE_CAPACITY"};
const char* const kNumberVariables[] = {"KHOROVOD_CYCLE_TIME", "KHOROVOD_STALL_CHECK_TIME_SECONDS",
                                        "KHOROVOD_TIMEOUT_SECONDS"};

TEST(Config, MalformedIntegersNameTheVariable) {
  for (const char* var : kIntegerVariables) {
    for (const char* bad : {"abc", "-1", "1.5", "3x", "2 ", "0x10", "99999999999999999999999"}) {
      SCOPED_TRACE(std::string(var) + "='" + bad + "'");
      Env env = TwoRanks();
      env[var] = bad;
      ExpectRejected(env, var);
    }
  }
}

TEST(Config, MalformedNumbersNameTheVariable) {
  for (const char* var : kNumberVariables) {
    for (const char* bad : {"abc", "-1", "1.5ms", "nan", "inf", "1e400", "."}) {
      SCOPED_TRACE(std::string(var) + "='" + bad + "'");
      Env env = TwoRanks();
      env[var] = bad;
      ExpectRejected(env, var);
    }
  }
}

TEST(Config, OutOfRangeValuesNameTheVariable) {
  ExpectRejected({{"KHOROVOD_SIZE", "0"}}, "KHOROVOD_SIZE");
  ExpectRejected({{"KHOROVOD_LOCAL_SIZE", "0"}}, "KHOROVOD_LOCAL_SIZE");
  ExpectRejected({{"KHOROVOD_CROSS_SIZE", "0"}}, "KHOROVOD_CROSS_SIZE");
  ExpectRejected({{"KHOROVOD_FUSION_THRESHOLD", "1099511627777"}}, "KHOROVOD_FUSION_THRESHOLD");
  ExpectRejected({{"KHOROVOD_CACHE_CAPACITY", "1048577"}}, "KHOROVOD_CACHE_CAPACITY");
  ExpectRejected({{"KHOROVOD_CYCLE_TIME", "10000.5"}}, "KHOROVOD_CYCLE_TIME");
  ExpectRejected({{"KHOROVOD_STALL_CHECK_TIME_SECONDS", "0"}}, "KHOROVOD_STALL_CHECK_TIME_SECONDS");
  ExpectRejected({{"KHOROVOD_TIMEOUT_SECONDS", "0"}}, "KHOROVOD_TIMEOUT_SECONDS");
}

TEST(Config, ObservabilityVariables) {
  Env env = TwoRanks();
  StatusOr<Config> defaults = Config::FromMap(env);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->metrics_port, 0);
  EXPECT_EQ(defaults->metrics_host, "0.0.0.0");
  EXPECT_EQ(defaults->baseline_samples_per_second, 0);
  EXPECT_EQ(defaults->timeline_path, "");
  env["KHOROVOD_METRICS_PORT"] = "9101";
  env["KHOROVOD_METRICS_HOST"] = "127.0.0.1";
  env["KHOROVOD_BASELINE_SAMPLES_PER_SECOND"] = "1250.5";
  env["KHOROVOD_TIMELINE"] = "/tmp/t.json";
  StatusOr<Config> c = Config::FromMap(env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->metrics_port, 9101);
  EXPECT_EQ(c->metrics_host, "127.0.0.1");
  EXPECT_EQ(c->baseline_samples_per_second, 1250.5);
  EXPECT_EQ(c->timeline_path, "/tmp/t.json");
  for (const char* bad : {"-1", "65536", "80x"}) {
    Env e = TwoRanks();
    e["KHOROVOD_METRICS_PORT"] = bad;
    ExpectRejected(e, "KHOROVOD_METRICS_PORT");
  }
  for (const char* bad : {"-1", "nan", "fast"}) {
    Env e = TwoRanks();
    e["KHOROVOD_BASELINE_SAMPLES_PER_SECOND"] = bad;
    ExpectRejected(e, "KHOROVOD_BASELINE_SAMPLES_PER_SECOND");
  }
}

TEST(Config, RankNotBelowSizeNamesTheVariable) {
  Env env = TwoRanks();
  env["KHOROVOD_RANK"] = "2";
  ExpectRejected(env, "KHOROVOD_RANK");
  env = TwoRanks();
  env["KHOROVOD_LOCAL_SIZE"] = "1";  // local rank defaults to the rank, 1
  ExpectRejected(env, "KHOROVOD_LOCAL_RANK");
  env = TwoRanks();
  env["KHOROVOD_CROSS_RANK"] = "1";  // cross size defaults to 1
  ExpectRejected(env, "KHOROVOD_CROSS_RANK");
}

TEST(Config, RankNotBelowSizeIsRejected) {
  // The code half of the check above, independent of the message wording.
  Env env = TwoRanks();
  env["KHOROVOD_RANK"] = "2";
  StatusOr<Config> c = Config::FromMap(env);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  env["KHOROVOD_RANK"] = "7";
  env["KHOROVOD_SIZE"] = "4";
  EXPECT_EQ(Config::FromMap(env).status().code(), StatusCode::kInvalidArgument);
}

TEST(Config, SizeAboveOneRequiresAStorePath) {
  ExpectRejected({{"KHOROVOD_RANK", "0"}, {"KHOROVOD_SIZE", "2"}}, "KHOROVOD_STORE_PATH");
  EXPECT_TRUE(Config::FromMap({{"KHOROVOD_SIZE", "1"}}).ok());
}

// khorovodrun's multi-host static jobs: the store is the rendezvous server's
// (with the job's token) instead of a directory; the NIC Gloo binds.
TEST(Config, StoreAddressAndNetworkInterface) {
  auto c = Config::FromMap({{"KHOROVOD_RANK", "1"},
                            {"KHOROVOD_SIZE", "4"},
                            {"KHOROVOD_STORE_ADDR", "10.0.0.1:4000"},
                            {"KHOROVOD_RENDEZVOUS_TOKEN", "t"},
                            {"KHOROVOD_NETWORK_INTERFACE", "eth1"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->store_addr, "10.0.0.1:4000");
  EXPECT_EQ(c->network_interface, "eth1");
  EXPECT_FALSE(c->elastic());
  ExpectRejected({{"KHOROVOD_RANK", "0"}, {"KHOROVOD_SIZE", "2"}, {"KHOROVOD_STORE_ADDR", "h:1"}},
                 "KHOROVOD_RENDEZVOUS_TOKEN");
  ExpectRejected({{"KHOROVOD_RANK", "0"},
                  {"KHOROVOD_SIZE", "2"},
                  {"KHOROVOD_STORE_ADDR", "h:1"},
                  {"KHOROVOD_RENDEZVOUS_TOKEN", "t"},
                  {"KHOROVOD_RENDEZVOUS_ADDR", "h:2"}},
                 "KHOROVOD_STORE_ADDR");
}

TEST(Config, ValidateChecksRangesAndCrossFieldConstraints) {
  Config c;
  EXPECT_TRUE(c.Validate().ok());
  auto rejected = [](Config bad) { return bad.Validate().code() == StatusCode::kInvalidArgument; };
  Config bad = c;
  bad.size = 0;
  EXPECT_TRUE(rejected(bad));
  bad = c;
  bad.rank = -1;
  EXPECT_TRUE(rejected(bad));
  bad = c;
  bad.job_id.clear();
  EXPECT_TRUE(rejected(bad));
  bad = c;
  bad.cycle_time = std::chrono::microseconds(-1);
  EXPECT_TRUE(rejected(bad));
  bad = c;
  bad.stall_warning_time = std::chrono::milliseconds(0);
  EXPECT_TRUE(rejected(bad));
  bad = c;
  bad.transport_timeout = std::chrono::milliseconds(0);
  EXPECT_TRUE(rejected(bad));
  bad = c;
  bad.size = 3;
  bad.rank = 2;
  EXPECT_TRUE(rejected(bad));  // no store path
  bad.store_path = "/s";
  bad.local_size = 3;
  bad.local_rank = 2;
  EXPECT_TRUE(bad.Validate().ok()) << bad.Validate();
}

TEST(Config, GpuSettings) {
  StatusOr<Config> d = Config::FromMap({});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->gpu_backend, "auto");
  EXPECT_EQ(d->gpu_device, -1);  // follow local_rank
  StatusOr<Config> c =
      Config::FromMap({{"KHOROVOD_GPU_OPERATIONS", "staging"}, {"KHOROVOD_GPU_DEVICE", "3"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->gpu_backend, "staging");
  EXPECT_EQ(c->gpu_device, 3);
  for (const char* bad : {"-1", "x", "1.5", "70000"}) {
    StatusOr<Config> b = Config::FromMap({{"KHOROVOD_GPU_DEVICE", bad}});
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(b.status().message().find("KHOROVOD_GPU_DEVICE"), std::string::npos) << b.status();
  }
}

TEST(Config, SpinWaits) {
  StatusOr<Config> d = Config::FromMap({});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->spin_waits, SpinWaits::kOn);
  const std::pair<const char*, SpinWaits> cases[] = {
      {"auto", SpinWaits::kAuto}, {"on", SpinWaits::kOn}, {"off", SpinWaits::kOff}};
  for (const auto& [text, want] : cases) {
    StatusOr<Config> c = Config::FromMap({{"KHOROVOD_SPIN_WAITS", text}});
    ASSERT_TRUE(c.ok()) << text << ": " << c.status();
    EXPECT_EQ(c->spin_waits, want) << text;
  }
  for (const char* bad : {"yes", "1", "ON"}) {
    StatusOr<Config> b = Config::FromMap({{"KHOROVOD_SPIN_WAITS", bad}});
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(b.status().message().find("KHOROVOD_SPIN_WAITS"), std::string::npos) << b.status();
  }
}

TEST(Config, LocalRanksAndNodeName) {
  StatusOr<Config> unset = Config::FromMap({});
  ASSERT_TRUE(unset.ok()) << unset.status();
  EXPECT_FALSE(unset->local_ranks_by_node) << "by pod (host), as Horovod";
  EXPECT_EQ(unset->node_name, "");
  StatusOr<Config> node =
      Config::FromMap({{"KHOROVOD_LOCAL_RANKS", "node"}, {"KHOROVOD_NODE_NAME", "gpu-7"}});
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_TRUE(node->local_ranks_by_node);
  EXPECT_EQ(node->node_name, "gpu-7");
  StatusOr<Config> pod = Config::FromMap({{"KHOROVOD_LOCAL_RANKS", "pod"}});
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_FALSE(pod->local_ranks_by_node);
  StatusOr<Config> bad = Config::FromMap({{"KHOROVOD_LOCAL_RANKS", "rack"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("KHOROVOD_LOCAL_RANKS"), std::string::npos);
}

}  // namespace
}  // namespace khorovod
