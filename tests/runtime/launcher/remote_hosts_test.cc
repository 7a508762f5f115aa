// remote_hosts.h, ssh_checks.h and host_address.h without a network: which
// hosts are local, the addresses of this machine, and the ssh checks run
// against stand-in ssh programs (scripts), including their cache, their
// retries and the --start-timeout bound.
#include "launcher/remote_hosts.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "launcher/host_address.h"
#include "launcher/scoped_temp_dir.h"
#include "launcher/ssh_checks.h"

namespace khorovod::launcher {
namespace {

using Clock = std::chrono::steady_clock;

std::string Script(const ScopedTempDir& dir, const std::string& name, const std::string& body) {
  const std::string path = dir.path() + "/" + name;
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  ::chmod(path.c_str(), 0755);
  return path;
}

SshCheckOptions Options(const std::string& program, const std::string& cache) {
  SshCheckOptions o;
  o.ssh.program = program;
  o.start_timeout = std::chrono::seconds(10);
  o.cache_path = cache;
  return o;
}

TEST(HostAddressTest, ThisMachinesAddresses) {
  EXPECT_EQ(*ResolveIpv4("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(*InterfaceIpv4("lo"), "127.0.0.1");
  EXPECT_EQ(*RouteSourceAddress("127.0.0.1"), "127.0.0.1");
  EXPECT_FALSE(InterfaceIpv4("no-such-nic0").ok());
  EXPECT_FALSE(RouteSourceAddress("not-an-address").ok());
  const StatusOr<ChosenInterface> chosen = FirstInterfaceWithIpv4({"no-such-nic0", "lo"});
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ(chosen->name, "lo");
  const std::vector<std::string> mine = LocalIpv4Addresses();
  EXPECT_NE(std::find(mine.begin(), mine.end(), "127.0.0.1"), mine.end());
}

TEST(RemoteHostsTest, LocalHostsNeedNoSsh) {
  EXPECT_EQ(HostNamesOf("a:2,b,a:1,c:3"), (std::vector<std::string>{"a", "b", "c"}));
  LaunchOptions o;
  std::ostringstream err;
  StatusOr<RemotePlan> plan = PlanRemoteHosts(o, {"localhost", "127.0.0.2"}, err);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_FALSE(plan->HasRemoteHosts());
  EXPECT_EQ(plan->AdvertisedAddress("localhost"), "127.0.0.1");
  EXPECT_TRUE(plan->NetworkVariables().empty());
  // --run-hosts-locally: any name is a group of slots here.
  o.hosts_run_locally = true;
  plan = PlanRemoteHosts(o, {"10.1.2.3"}, err);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->IsRemote("10.1.2.3"));
  // An interface of this machine, for local jobs.
  o.network_interfaces = {"no-such-nic0", "lo"};
  plan = PlanRemoteHosts(o, {}, err);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->NetworkVariables(), (std::vector<EnvVar>{{"KHOROVOD_NETWORK_INTERFACE", "lo"},
                                                           {"HOROVOD_GLOO_IFACE", "lo"},
                                                           {"NCCL_SOCKET_IFNAME", "lo"}}));
  o.network_interfaces = {"no-such-nic0"};
  EXPECT_FALSE(PlanRemoteHosts(o, {}, err).ok());
}

TEST(SshChecksTest, SuccessIsCachedAndDisableCacheChecksAgain) {
  ScopedTempDir dir("khorovod-ssh-checks-");
  const std::string cache = dir.path() + "/cache/ssh-checks";
  const std::string ok = Script(dir, "ssh-ok", "printf 'eth0\\nlo\\n'");
  std::ostringstream err;
  StatusOr<HostInterfaces> found = CheckRemoteHosts({"h1", "h2"}, Options(ok, cache), err);
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_EQ(found->at("h1"), (std::vector<std::string>{"eth0", "lo"}));
  // Cached per host, port, key file and program: the same program that now
  // fails is not run for cached hosts...
  const std::string broken = Script(dir, "ssh-ok", "exit 255");
  found = CheckRemoteHosts({"h1", "h2"}, Options(broken, cache), err);
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_EQ(found->at("h2"), (std::vector<std::string>{"eth0", "lo"}));
  // ...unless the cache is disabled (--disable-cache) or the key differs.
  SshCheckOptions no_cache = Options(broken, cache);
  no_cache.use_cache = false;
  EXPECT_EQ(CheckRemoteHosts({"h1"}, no_cache, err).status().code(), StatusCode::kUnavailable);
  SshCheckOptions other_port = Options(broken, cache);
  other_port.ssh.port = 2222;
  EXPECT_FALSE(CheckRemoteHosts({"h1"}, other_port, err).ok());
}

TEST(SshChecksTest, FailuresAreRetriedReportedAndNotCached) {
  ScopedTempDir dir("khorovod-ssh-checks-");
  const std::string cache = dir.path() + "/ssh-checks";
  const std::string count = dir.path() + "/tries";
  const std::string denied =
      Script(dir, "ssh-denied",
             "echo x >>" + count + "; echo 'Permission denied (publickey).' >&2; exit 255");
  std::ostringstream err;
  const StatusOr<HostInterfaces> found = CheckRemoteHosts({"h1"}, Options(denied, cache), err);
  EXPECT_EQ(found.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(found.status().message(), "could not connect to some hosts via ssh");
  EXPECT_NE(err.str().find("ssh not successful for host h1:\nPermission denied (publickey)."),
            std::string::npos)
      << err.str();
  std::ifstream tries(count);
  int lines = 0;
  for (std::string line; std::getline(tries, line);) ++lines;
  EXPECT_EQ(lines, 5) << "horovodrun tries ssh 5 times";
  std::ifstream cached(cache);
  EXPECT_FALSE(cached.good()) << "a failure must not be cached";
}

TEST(SshChecksTest, StartTimeoutBoundsTheChecks) {
  ScopedTempDir dir("khorovod-ssh-checks-");
  const std::string hang = Script(dir, "ssh-hang", "exec sleep 60");
  SshCheckOptions o = Options(hang, "");
  o.start_timeout = std::chrono::seconds(1);
  std::ostringstream err;
  const auto start = Clock::now();
  const StatusOr<HostInterfaces> found = CheckRemoteHosts({"h1", "h2"}, o, err);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(found.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(found.status().message().find(
                "Timed out waiting for ssh to h1, h2. Please check connectivity"),
            std::string::npos)
      << found.status().message();
}

}  // namespace
}  // namespace khorovod::launcher
