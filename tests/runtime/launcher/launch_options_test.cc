#include "launcher/launch_options.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

namespace khorovod::launcher {
namespace {

struct Parsed {
  ParseOutcome outcome;
  std::string out;
  std::string err;
};

Parsed parse(const std::vector<std::string>& args) {
  std::ostringstream out;
  std::ostringstream err;
  ParseOutcome outcome = ParseLaunchOptions(args, out, err);
  return Parsed{std::move(outcome), out.str(), err.str()};
}

LaunchOptions ParseOk(const std::vector<std::string>& args) {
  Parsed p = parse(args);
  EXPECT_TRUE(p.outcome.options.has_value()) << p.err;
  return p.outcome.options.value_or(LaunchOptions{});
}

using Args = std::vector<std::string>;

TEST(LaunchOptionsTest, HorovodrunStyleWithDefaults) {
  const LaunchOptions o = ParseOk({"-np", "4", "./trainer", "--steps", "10"});
  EXPECT_EQ(o.num_proc, 4);
  EXPECT_EQ(o.command, (Args{"./trainer", "--steps", "10"}));
  EXPECT_EQ(o.job_id, "");
  EXPECT_EQ(o.hostname, "127.0.0.1");
  EXPECT_EQ(o.grace_period, std::chrono::milliseconds(3000));
  EXPECT_TRUE(o.extra_env.empty());
}

TEST(LaunchOptionsTest, NumProcSpellings) {
  for (const Args& args : {Args{"-np", "2", "p"}, Args{"-np=2", "p"}, Args{"--np", "2", "p"},
                           Args{"--np=2", "p"}, Args{"--num-proc", "2", "p"}}) {
    EXPECT_EQ(ParseOk(args).num_proc, 2) << args[0];
  }
}

TEST(LaunchOptionsTest, AllOptions) {
  const LaunchOptions o =
      ParseOk({"--job-id", "job-1", "--hostname", "10.0.0.1", "--grace-period-ms", "250", "-x",
               "A=1", "-x", "B", "-xC=x=y", "--env=D=", "-np", "3", "prog"});
  EXPECT_EQ(o.num_proc, 3);
  EXPECT_EQ(o.job_id, "job-1");
  EXPECT_EQ(o.hostname, "10.0.0.1");
  EXPECT_EQ(o.grace_period, std::chrono::milliseconds(250));
  EXPECT_EQ(o.extra_env,
            (std::vector<EnvSpec>{{"A", "1"}, {"B", std::nullopt}, {"C", "x=y"}, {"D", ""}}));
  EXPECT_EQ(o.command, Args{"prog"});
}

TEST(LaunchOptionsTest, ProgramArgumentsAreNeverParsed) {
  const Args program_args{"-np", "3", "-x", "A=1", "--", "[1,2]", "{}", "", "--help"};
  Args args{"-np", "2", "-x", "B=2", "prog"};
  args.insert(args.end(), program_args.begin(), program_args.end());
  const LaunchOptions o = ParseOk(args);
  EXPECT_EQ(o.num_proc, 2);
  EXPECT_EQ(o.extra_env, (std::vector<EnvSpec>{{"B", "2"}}));
  Args expected{"prog"};
  expected.insert(expected.end(), program_args.begin(), program_args.end());
  EXPECT_EQ(o.command, expected);
}

TEST(LaunchOptionsTest, DoubleDashAllowsProgramStartingWithDash) {
  EXPECT_EQ(ParseOk({"-np", "1", "--", "-weird", "a"}).command, (Args{"-weird", "a"}));
  EXPECT_EQ(ParseOk({"-np", "1", "--", "--", "a"}).command, (Args{"--", "a"}));
}

TEST(LaunchOptionsTest, ExtraEnvDoesNotSwallowProgram) {
  const LaunchOptions o = ParseOk({"-np", "1", "-x", "FOO", "prog", "arg"});
  EXPECT_EQ(o.extra_env, (std::vector<EnvSpec>{{"FOO", std::nullopt}}));
  EXPECT_EQ(o.command, (Args{"prog", "arg"}));
}

TEST(LaunchOptionsTest, HelpIsNotAnError) {
  const Parsed p = parse({"--help"});
  EXPECT_FALSE(p.outcome.options);
  EXPECT_EQ(p.outcome.exit_code, 0);
  EXPECT_NE(p.out.find("--np"), std::string::npos);
  EXPECT_NE(p.out.find("--grace-period-ms"), std::string::npos);
}

TEST(LaunchOptionsTest, HostDiscoveryScriptImpliesElastic) {
  const LaunchOptions o = ParseOk({"-np", "2", "--max-np", "4", "--host-discovery-script", "./d.sh",
                                   "--discovery-interval-ms", "250", "prog"});
  EXPECT_TRUE(o.elastic());
  EXPECT_EQ(o.host_discovery_script, "./d.sh");
  EXPECT_EQ(o.discovery_interval, std::chrono::milliseconds(250));
  EXPECT_EQ(o.min_np, 2);  // Horovod: --min-np defaults to -np
  EXPECT_EQ(o.max_np, 4);
  EXPECT_EQ(ParseOk({"-np", "2", "prog"}).discovery_interval, std::chrono::milliseconds(1000));
}

class LaunchOptionsRejectTest
    : public ::testing::TestWithParam<std::pair<Args, std::string /*expected in message*/>> {};

TEST_P(LaunchOptionsRejectTest, ClearErrorAndNonZeroExit) {
  const auto& [args, expected] = GetParam();
  const Parsed p = parse(args);
  EXPECT_FALSE(p.outcome.options);
  EXPECT_NE(p.outcome.exit_code, 0);
  EXPECT_NE(p.err.find(expected), std::string::npos) << p.err;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, LaunchOptionsRejectTest,
    ::testing::Values(
        std::pair{Args{}, "--np is required"}, std::pair{Args{"prog"}, "--np is required"},
        std::pair{Args{"-np", "0", "prog"}, "must be at least 1, got 0"},
        std::pair{Args{"-np", "-3", "prog"}, "must be at least 1, got -3"},
        std::pair{Args{"-np", "x", "prog"}, "--np"},
        std::pair{Args{"-np", "2"}, "program is required"},
        std::pair{Args{"-np", "2", "--"}, "program is required"}, std::pair{Args{"-np"}, "--np"},
        std::pair{Args{"-np", "2", "--bogus", "prog"}, "--bogus"},
        std::pair{Args{"-np", "2", "-x", "", "prog"}, "NAME"},
        std::pair{Args{"-np", "2", "-x", "=v", "prog"}, "NAME"},
        std::pair{Args{"-np", "2", "-x", "A-B=1", "prog"}, "not a valid"},
        std::pair{Args{"-np", "2", "-x", "KHOROVOD_SIZE=9", "prog"}, "KHOROVOD_SIZE"},
        std::pair{Args{"-np", "2", "--job-id", "", "prog"}, "job id"},
        std::pair{Args{"-np", "2", "--job-id", "a b", "prog"}, "job id"},
        std::pair{Args{"-np", "2", "--hostname", "", "prog"}, "hostname"},
        std::pair{Args{"-np", "2", "--grace-period-ms", "-1", "prog"},
                  "grace period must be at least 0"},
        std::pair{Args{"-np", "2", "--host-discovery-script", "d", "--discovery-interval-ms", "5",
                       "prog"},
                  "--discovery-interval-ms"},
        std::pair{Args{"-np", "2", "-H", "localhost:2", "--host-discovery-script", "d", "prog"},
                  "excludes"}));

TEST(LaunchOptionsTest, HorovodrunFlagsAreAcceptedOrTranslated) {
  const LaunchOptions o = ParseOk({"-np",
                                   "2",
                                   "-H",
                                   "localhost:2",
                                   "--gloo",
                                   "--verbose",
                                   "--network-interface",
                                   "lo",
                                   "--start-timeout",
                                   "90",
                                   "--fusion-threshold-mb",
                                   "2",
                                   "--cycle-time-ms",
                                   "0.5",
                                   "--disable-cache",
                                   "--timeline-filename",
                                   "/tmp/tl.json",
                                   "--log-level",
                                   "INFO",
                                   "python",
                                   "train.py"});
  EXPECT_EQ(o.command, (Args{"python", "train.py"}));
  // --start-timeout and --disable-cache are about the ssh checks of remote
  // hosts (remote_hosts.h): the elastic timeout and the response cache stay.
  EXPECT_EQ(o.elastic_timeout, std::chrono::seconds(600));
  EXPECT_EQ(o.start_timeout, std::chrono::seconds(90));
  EXPECT_TRUE(o.disable_cache);
  EXPECT_EQ(o.network_interfaces, (Args{"lo"}));
  EXPECT_TRUE(o.verbose);
  EXPECT_EQ(o.extra_env, (std::vector<EnvSpec>{{"KHOROVOD_FUSION_THRESHOLD", "2097152"},
                                               {"KHOROVOD_CYCLE_TIME", "0.5"},
                                               {"KHOROVOD_TIMELINE", "/tmp/tl.json"}}));
}

TEST(LaunchOptionsTest, HorovodrunHostAndElasticFlags) {
  const std::string hostfile = ::testing::TempDir() + "/khorovod_hostfile";
  {
    std::ofstream f(hostfile);
    f << "# comment\nhost-1 slots=2\n\nhost-2 slots=3\n";
  }
  const LaunchOptions o =
      ParseOk({"-np", "2", "--min-num-proc", "1", "--max-num-proc", "5", "-hostfile", hostfile,
               "--run-hosts-locally", "--slots-per-host", "4", "--blacklist-cooldown-range", "2",
               "30", "--gloo-timeout-seconds", "7", "prog", "a"});
  EXPECT_EQ(o.min_np, 1);
  EXPECT_EQ(o.max_np, 5);
  EXPECT_EQ(o.hosts, "host-1:2,host-2:3");
  EXPECT_EQ(o.slots_per_host, 4);
  EXPECT_EQ(o.cooldown_min_s, 2);
  EXPECT_EQ(o.cooldown_max_s, 30);
  EXPECT_EQ(o.command, (Args{"prog", "a"}));
  EXPECT_EQ(o.extra_env, (std::vector<EnvSpec>{{"KHOROVOD_TIMEOUT_SECONDS", "7"}}));
  EXPECT_EQ(ParseOk({"-np", "2", "--slots", "3", "prog"}).slots_per_host, 3);
  // Horovod: an elastic job without --max-np may use every slot -H offers.
  EXPECT_EQ(
      ParseOk({"-np", "2", "--min-num-proc", "2", "-H", "localhost:2,127.0.0.1:2", "prog"}).max_np,
      4);
  EXPECT_EQ(
      ParseOk({"-np", "3", "--min-num-proc", "2", "-H", "localhost,127.0.0.1:2", "prog"}).max_np,
      3);
  EXPECT_EQ(ParseOk({"-np", "2", "--min-num-proc", "2", "-H", "localhost:8", "--max-num-proc", "3",
                     "prog"})
                .max_np,
            3);
  EXPECT_EQ(ParseOk({"-np", "3", "--output-filename", "/tmp/o", "prog"}).output_filename, "/tmp/o");
  // Without --run-hosts-locally other hosts are remote, reached over ssh.
  const LaunchOptions remote = ParseOk({"-np", "2", "--hostfile", hostfile, "-p", "2222", "-i",
                                        "/k/id", "--network-interfaces", "eth1,eth0", "prog"});
  EXPECT_EQ(remote.hosts, "host-1:2,host-2:3");
  EXPECT_FALSE(remote.hosts_run_locally);
  EXPECT_EQ(remote.ssh_port, 2222);
  EXPECT_EQ(remote.ssh_identity_file, "/k/id");
  EXPECT_EQ(remote.network_interfaces, (Args{"eth1", "eth0"}));
  EXPECT_EQ(remote.start_timeout,
            std::chrono::seconds(0));  // HOROVOD_START_TIMEOUT or 30 s, when used
}

TEST(LaunchOptionsTest, HorovodrunBadHostAndElasticValues) {
  const std::string bad = ::testing::TempDir() + "/khorovod_bad_hostfile";
  {
    std::ofstream f(bad);
    f << "host-1 slots=two\n";
  }
  for (const auto& [args, expected] : std::vector<std::pair<Args, std::string>>{
           {{"-np", "2", "--hostfile", bad, "prog"}, ":1: slot count"},
           {{"-np", "2", "--hostfile", "/nonexistent/h", "prog"}, "cannot be read"},
           {{"-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "0", "5", "prog"},
            "1 <= MIN"},
           {{"-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "9", "5", "prog"},
            "1 <= MIN"},
           {{"-np", "2", "--min-np", "1", "--output-filename", "/tmp/o", "prog"}, "elastic"},
           {{"-np", "2", "--log-level", "LOUD", "prog"}, "--log-level"},
           {{"-np", "2", "--log-level", "error", "prog"}, "cannot silence"}}) {
    const Parsed p = parse(args);
    EXPECT_FALSE(p.outcome.options.has_value()) << args[2];
    EXPECT_NE(p.err.find(expected), std::string::npos) << p.err;
  }
}

TEST(LaunchOptionsTest, EveryRefusedHorovodrunFlagSaysWhy) {
  for (const Args& flag :
       {Args{"--mpi"}, Args{"--jsrun"}, Args{"-cb"}, Args{"--config-file", "c.yaml"},
        Args{"--hierarchical-allreduce"}, Args{"--autotune"}, Args{"--autotune-log-file", "l"},
        Args{"--mpi-args", "x"}, Args{"--tcp"}, Args{"--num-nccl-streams", "2"},
        Args{"--thread-affinity", "1"}, Args{"--timeline-mark-cycles"}, Args{"-prefix-timestamp"},
        Args{"--log-with-timestamp"}}) {
    Args args{"-np", "2"};
    args.insert(args.end(), flag.begin(), flag.end());
    args.push_back("prog");
    const Parsed p = parse(args);
    EXPECT_FALSE(p.outcome.options.has_value()) << flag[0];
    EXPECT_EQ(p.outcome.exit_code, 2) << flag[0];
    EXPECT_NE(p.err.find("khorovodrun: --"), std::string::npos) << p.err;
    EXPECT_GT(p.err.size(), 40u) << "a reason, not just the name: " << p.err;
  }
  // Horovod's defaults, spelled out, are accepted.
  ParseOk({"-np", "2", "--log-without-timestamp", "--no-timeline-mark-cycles", "--stall-check",
           "prog"});
}

TEST(LaunchOptionsTest, HorovodrunStallCheckFlags) {
  const LaunchOptions o = ParseOk({"-np", "2", "--stall-check-warning-time-seconds", "2",
                                   "--stall-check-shutdown-time-seconds", "5", "prog"});
  EXPECT_EQ(o.extra_env, (std::vector<EnvSpec>{{"KHOROVOD_STALL_CHECK_TIME_SECONDS", "2"},
                                               {"KHOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "5"}}));
  const LaunchOptions off = ParseOk({"-np", "2", "--no-stall-check", "prog"});
  EXPECT_EQ(off.extra_env, (std::vector<EnvSpec>{{"KHOROVOD_STALL_CHECK_DISABLE", "1"}}));
  for (const Args& args : {Args{"-np", "2", "--stall-check-warning-time-seconds", "0", "prog"},
                           Args{"-np", "2", "--stall-check-shutdown-time-seconds", "-1", "prog"}}) {
    const Parsed p = parse(args);
    EXPECT_FALSE(p.outcome.options.has_value()) << args[2];
    EXPECT_NE(p.err.find(args[2]), std::string::npos) << p.err;
  }
}

TEST(LaunchOptionsTest, SshPortOutOfRangeIsAUsageError) {
  const Parsed p = parse({"-np", "2", "--ssh-port", "0", "prog"});
  EXPECT_FALSE(p.outcome.options.has_value());
  EXPECT_NE(p.outcome.exit_code, 0);
  EXPECT_NE(p.err.find("--ssh-port"), std::string::npos) << p.err;
}

TEST(LaunchOptionsTest, HorovodrunFlagsWithoutMeaningHereFailClearly) {
  for (const Args& args : {Args{"-np", "2", "--mpi", "prog"},
                           Args{"-np", "2", "--network-interface", "eth0,,lo", "prog"},
                           Args{"-np", "2", "-H", "a:2,:2", "prog"},
                           Args{"-np", "2", "--cycle-time-ms", "soon", "prog"}}) {
    const Parsed p = parse(args);
    EXPECT_FALSE(p.outcome.options.has_value()) << args[2];
    EXPECT_EQ(p.outcome.exit_code, 2) << args[2];
    EXPECT_NE(p.err.find(args[2]), std::string::npos) << p.err;
  }
}

TEST(EnvSpecTest, ValidateAndParse) {
  EXPECT_TRUE(ValidateEnvSpec("FOO").ok());
  EXPECT_TRUE(ValidateEnvSpec("_foo9=a b=c").ok());
  EXPECT_FALSE(ValidateEnvSpec("9FOO").ok());
  EXPECT_FALSE(ValidateEnvSpec("FO.O=1").ok());
  EXPECT_FALSE(ValidateEnvSpec("KHOROVOD_RANK").ok());
  EXPECT_TRUE(ValidateEnvSpec("KHOROVOD_OTHER=1").ok());  // only the contract names are reserved
  EXPECT_EQ(ParseEnvSpec("FOO"), (EnvSpec{"FOO", std::nullopt}));
  EXPECT_EQ(ParseEnvSpec("FOO="), (EnvSpec{"FOO", ""}));
  EXPECT_EQ(ParseEnvSpec("FOO=a=b"), (EnvSpec{"FOO", "a=b"}));
}

TEST(JobIdTest, RandomHex) {
  const std::string a = GenerateJobId().value();
  const std::string b = GenerateJobId().value();
  EXPECT_TRUE(std::regex_match(a, std::regex("[0-9a-f]{16}"))) << a;
  EXPECT_NE(a, b);  // 2^-64 chance of a false failure
}

}  // namespace
}  // namespace khorovod::launcher
