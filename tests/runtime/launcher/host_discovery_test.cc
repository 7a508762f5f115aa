// Unit tests of host_discovery: the output format, the local-host rule, and
// running a real script (bounded by its timeout).
#include "launcher/host_discovery.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "launcher/host_blacklist.h"
#include "launcher/rank_output_files.h"

namespace khorovod::launcher {
namespace {

using Hosts = std::vector<DiscoveredHost>;

Hosts ParseOk(const std::string& text) {
  DiscoveryResult r = ParseDiscoveryOutput(text);
  EXPECT_TRUE(std::holds_alternative<Hosts>(r)) << std::get<std::string>(r);
  return std::holds_alternative<Hosts>(r) ? std::get<Hosts>(r) : Hosts{};
}

TEST(HostDiscoveryParse, HostSlotsLinesInOrderBlankLinesSkipped) {
  EXPECT_EQ(ParseOk("localhost:2\n\n  127.0.0.2:3 \r\n127.0.0.3\n"),
            (Hosts{{"localhost", 2}, {"127.0.0.2", 3}, {"127.0.0.3", 1}}));
  EXPECT_EQ(ParseOk(""), Hosts{});
}

TEST(HostDiscoveryParse, RepeatedHostAddsSlots) {
  EXPECT_EQ(ParseOk("localhost:2\n127.0.0.2:1\nlocalhost:1\n"),
            (Hosts{{"localhost", 3}, {"127.0.0.2", 1}}));
}

TEST(HostDiscoveryParse, BadLinesAreErrorsNamingTheLine) {
  for (const std::string bad : {"localhost:0", "localhost:-1", "localhost:x", "localhost:", ":2",
                                "a b:1", "localhost:99999999999", "h1,h2:1"}) {
    DiscoveryResult r = ParseDiscoveryOutput("127.0.0.1:1\n" + bad + "\n");
    ASSERT_TRUE(std::holds_alternative<std::string>(r)) << bad;
    EXPECT_NE(std::get<std::string>(r).find("line 2"), std::string::npos)
        << std::get<std::string>(r);
  }
}

TEST(HostDiscoveryLocal, LoopbackLocalhostAndOwnNameOnly) {
  EXPECT_TRUE(IsLocalHost("localhost", "box"));
  EXPECT_TRUE(IsLocalHost("127.0.0.1", "box"));
  EXPECT_TRUE(IsLocalHost("127.3.2.1", "box"));
  EXPECT_TRUE(IsLocalHost("box", "box"));
  EXPECT_FALSE(IsLocalHost("other", "box"));
  EXPECT_FALSE(IsLocalHost("10.0.0.1", "box"));
  EXPECT_FALSE(IsLocalHost("127.0.0.256", "box"));
  EXPECT_FALSE(IsLocalHost("127.0.0.1.example.com", "box"));
  EXPECT_FALSE(IsLocalHost("", ""));
}

class HostDiscoveryScript : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/discovery-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string script(const std::string& body, mode_t mode = 0755) {
    const std::string path = dir_ + "/discover.sh";
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    ::chmod(path.c_str(), mode);
    return path;
  }
  std::string dir_;
};

TEST_F(HostDiscoveryScript, OutputOfASuccessfulScriptIsParsed) {
  DiscoveryResult r =
      RunDiscoveryScript(script("echo localhost:2; echo 127.0.0.2:1"), std::chrono::seconds(10));
  ASSERT_TRUE(std::holds_alternative<Hosts>(r)) << std::get<std::string>(r);
  EXPECT_EQ(std::get<Hosts>(r), (Hosts{{"localhost", 2}, {"127.0.0.2", 1}}));
}

TEST_F(HostDiscoveryScript, FailuresAreErrors) {
  DiscoveryResult r =
      RunDiscoveryScript(script("echo localhost:2; exit 3"), std::chrono::seconds(10));
  ASSERT_TRUE(std::holds_alternative<std::string>(r));
  EXPECT_NE(std::get<std::string>(r).find("exited with code 3"), std::string::npos)
      << std::get<std::string>(r);

  r = RunDiscoveryScript(script("echo localhost:2", 0644), std::chrono::seconds(10));
  ASSERT_TRUE(std::holds_alternative<std::string>(r));
  EXPECT_NE(std::get<std::string>(r).find("not executable"), std::string::npos)
      << std::get<std::string>(r);

  r = RunDiscoveryScript(dir_ + "/missing.sh", std::chrono::seconds(10));
  ASSERT_TRUE(std::holds_alternative<std::string>(r));
  EXPECT_NE(std::get<std::string>(r).find("not found"), std::string::npos)
      << std::get<std::string>(r);
}

TEST_F(HostDiscoveryScript, HangingScriptIsKilledAtTheTimeout) {
  // The script (and the sleep it started, same process group) would run 60 s.
  const auto start = std::chrono::steady_clock::now();
  DiscoveryResult r =
      RunDiscoveryScript(script("echo localhost:1; sleep 60"), std::chrono::milliseconds(300));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  ASSERT_TRUE(std::holds_alternative<std::string>(r));
  EXPECT_NE(std::get<std::string>(r).find("did not finish within 300 ms"), std::string::npos)
      << std::get<std::string>(r);
}

}  // namespace
}  // namespace khorovod::launcher

namespace khorovod::launcher {
namespace {

TEST(HostBlacklistTest, ForGoodWithoutARange) {
  HostBlacklist b(0, 0, [] { return 0.5; });
  const auto t0 = HostBlacklist::Clock::now();
  EXPECT_FALSE(b.IsBlacklisted("h", t0));
  b.Fail("h", t0);
  EXPECT_TRUE(b.IsBlacklisted("h", t0 + std::chrono::hours(100)));
  EXPECT_FALSE(b.IsBlacklisted("other", t0));
  EXPECT_FALSE(b.CooldownEnd("h").has_value());
}

TEST(HostBlacklistTest, CooldownDoublesWithinTheRange) {
  HostBlacklist b(2, 30, [] { return 0.5; });
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  const auto t0 = HostBlacklist::Clock::now();
  b.Fail("h", t0);  // 2*2 + 0.5*2 = 5 s
  EXPECT_EQ(duration_cast<milliseconds>(*b.CooldownEnd("h") - t0).count(), 5000);
  EXPECT_TRUE(b.IsBlacklisted("h", t0 + std::chrono::seconds(4)));
  b.Fail("h", t0 + std::chrono::seconds(4));  // still cooling down: not extended
  EXPECT_EQ(duration_cast<milliseconds>(*b.CooldownEnd("h") - t0).count(), 5000);
  const auto t1 = t0 + std::chrono::seconds(6);
  EXPECT_FALSE(b.IsBlacklisted("h", t1));
  b.Fail("h", t1);  // 2*4 + 1 = 9 s
  EXPECT_EQ(duration_cast<milliseconds>(*b.CooldownEnd("h") - t1).count(), 9000);
  const auto t2 = t1 + std::chrono::seconds(10);
  b.Fail("h", t2);  // 2*8 + 1 = 17 s
  const auto t3 = t2 + std::chrono::seconds(18);
  b.Fail("h", t3);  // 33 s, clamped to 30
  EXPECT_EQ(duration_cast<milliseconds>(*b.CooldownEnd("h") - t3).count(), 30000);
}

TEST(HostDiscoveryTest, SlotsPerHostForLinesWithoutSlots) {
  const DiscoveryResult r = ParseDiscoveryOutput("a\nb:2\n", 4);
  ASSERT_TRUE(std::holds_alternative<std::vector<DiscoveredHost>>(r));
  EXPECT_EQ(std::get<std::vector<DiscoveredHost>>(r),
            (std::vector<DiscoveredHost>{{"a", 4}, {"b", 2}}));
}

TEST(RankOutputFilesTest, HorovodLayout) {
  EXPECT_EQ(RankDirName(3, 11), "rank.03");
  EXPECT_EQ(RankDirName(0, 1), "rank.0");
  EXPECT_EQ(RankDirName(7, 10), "rank.7");
  const std::string dir = ::testing::TempDir() + "/khorovod_rank_out/a";
  auto files = OpenRankOutputFiles(dir, 1, 2);
  ASSERT_TRUE(files.ok()) << files.status().message();
  EXPECT_TRUE(files->stdout_file);
  EXPECT_EQ(::access((dir + "/rank.1/stderr").c_str(), F_OK), 0);
  EXPECT_FALSE(OpenRankOutputFiles("/proc/nope", 0, 1).ok());
}

}  // namespace
}  // namespace khorovod::launcher
