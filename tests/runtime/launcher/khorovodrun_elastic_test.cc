// End-to-end tests of khorovodrun's elastic policy with /bin/sh workers
// (they never contact the rendezvous server; only the launcher's decisions
// are under test): --host-discovery-script adding and removing workers, a
// non-local or failing script at start, and a worker that exits 0 early.
//
// Workers announce themselves with ready.<worker name> files; the test moves
// them on with files it creates. Every wait has a deadline, and the scripts
// bound their own waits (exit 99), so nothing can hang.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "launcher_process.h"

namespace khorovod::launcher::testing {
namespace {

namespace fs = std::filesystem;

// Waits (at most 20 s) for $TESTDIR/<file>; exits 99 past that.
std::string WaitFileSh(const std::string& file) {
  return "n=0; while [ ! -e \"$TESTDIR/" + file +
         "\" ]; do n=$((n+1)); [ $n -gt 2000 ] && exit 99; sleep 0.01; done; ";
}

// A worker that reports SIGTERM, says it is ready, and waits for `finish`.
const std::string kWorker =
    "trap 'echo term; exit 0' TERM; touch \"$TESTDIR/ready.$KHOROVOD_WORKER_NAME\"; " +
    WaitFileSh("finish") + "echo done";

class KhorovodrunElasticTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/khorovodrun-el-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    script_ = dir_ + "/discover.sh";
    // Counts its runs (one line each) so a test can wait for later rounds.
    std::ofstream(script_) << "#!/bin/sh\necho run >> \"" << dir_ << "/runs\"\ncat \"" << dir_
                           << "/hosts\"\n";
    ::chmod(script_.c_str(), 0755);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  // Replaces the host list atomically: the script may be reading it.
  void SetHosts(const std::string& text) {
    std::ofstream(dir_ + "/hosts.tmp") << text;
    fs::rename(dir_ + "/hosts.tmp", dir_ + "/hosts");
  }
  void touch(const std::string& name) { std::ofstream(dir_ + "/" + name) << ""; }
  bool exists(const std::string& name) const { return fs::exists(dir_ + "/" + name); }
  int runs() const {
    std::ifstream in(dir_ + "/runs");
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  }
  std::vector<std::string> env() const { return {"TMPDIR=" + dir_, "TESTDIR=" + dir_}; }
  std::vector<std::string> DiscoveryArgs(const std::string& worker) const {
    return {"-np",
            "2",
            "--min-np",
            "1",
            "--max-np",
            "4",
            "--host-discovery-script",
            script_,
            "--discovery-interval-ms",
            "50",
            "/bin/sh",
            "-c",
            worker};
  }

  std::string dir_;
  std::string script_;
};

TEST_F(KhorovodrunElasticTest, DiscoveryAddsWorkersForNewHostsAndStopsThoseOfRemovedHosts) {
  SetHosts("localhost:2\n");
  LauncherProcess p(DiscoveryArgs(kWorker), env());
  ASSERT_TRUE(p.WaitUntil([&] { return exists("ready.worker-0") && exists("ready.worker-1"); }))
      << p.err();

  // A new host. (Remote hosts: khorovodrun_ssh_test.sh.)
  SetHosts("localhost:2\n127.0.0.2:1\n");
  ASSERT_TRUE(p.WaitUntil([&] { return exists("ready.worker-2"); })) << p.err();

  // localhost goes away: its two workers are stopped, 127.0.0.2 keeps its one.
  SetHosts("127.0.0.2:1\n");
  ASSERT_TRUE(p.WaitUntil([&] {
    return p.out().find("[0]<stdout>:term") != std::string::npos &&
           p.out().find("[1]<stdout>:term") != std::string::npos;
  })) << p.out()
      << p.err();
  touch("finish");
  const LauncherResult r = p.wait();
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[2]<stdout>:done"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("[2]<stdout>:term"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("starting worker 2 on 127.0.0.2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("stopping worker 0"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("stopping worker 1"), std::string::npos) << r.err;
  EXPECT_FALSE(exists("ready.worker-3")) << "a worker beyond the discovered slots was started";
}

TEST_F(KhorovodrunElasticTest, DiscoveryNeverExceedsMaxNp) {
  SetHosts("localhost:3\n127.0.0.2:3\n");  // 6 slots, --max-np 4
  LauncherProcess p(DiscoveryArgs(kWorker), env());
  ASSERT_TRUE(p.WaitUntil([&] {
    return exists("ready.worker-0") && exists("ready.worker-1") && exists("ready.worker-2") &&
           exists("ready.worker-3");
  })) << p.err();
  // Three more discovery rounds with even more slots must not add a worker.
  SetHosts("localhost:3\n127.0.0.2:3\n127.0.0.3:1\n");
  const int seen = runs();
  ASSERT_TRUE(p.WaitUntil([&] { return runs() >= seen + 3; })) << p.err();
  touch("finish");
  const LauncherResult r = p.wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(exists("ready.worker-4")) << r.err;
}

TEST_F(KhorovodrunElasticTest, JobWithoutHostsWaitsForThemUpToTheElasticTimeout) {
  SetHosts("localhost:1\n");
  std::vector<std::string> args = DiscoveryArgs(kWorker);
  args.insert(args.begin(), {"--elastic-timeout", "1"});
  LauncherProcess p(args, env());
  ASSERT_TRUE(p.WaitUntil([&] { return exists("ready.worker-0"); })) << p.err();
  SetHosts("");  // every host gone: the worker is stopped, the job waits, then gives up
  const LauncherResult r = p.wait();
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("[0]<stdout>:term"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("no worker has been running for 1 s"), std::string::npos) << r.err;
}

// A remote host is checked with ssh before anything starts; one that
// refuses fails the job at once, in horovodrun's words. KHOROVOD_SSH=false
// stands for an ssh that cannot log in (no packet leaves the machine).
TEST_F(KhorovodrunElasticTest, RemoteHostThatRefusesSshAtStartIsAClearErrorNotAWait) {
  SetHosts("10.1.2.3:4\n");
  std::vector<std::string> environment = env();
  environment.push_back("KHOROVOD_SSH=false");
  const LauncherResult r = RunLauncher(DiscoveryArgs(kWorker), environment);
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ssh not successful for host 10.1.2.3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("khorovodrun: could not connect to some hosts via ssh"), std::string::npos)
      << r.err;
  EXPECT_FALSE(exists("ready.worker-0"));
}

TEST_F(KhorovodrunElasticTest, FailingOrGarbageScriptAtStartIsAClearError) {
  SetHosts("localhost:two\n");
  LauncherResult r = RunLauncher(DiscoveryArgs(kWorker), env());
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("expected host:slots"), std::string::npos) << r.err;

  fs::remove(dir_ + "/hosts");  // cat fails
  r = RunLauncher(DiscoveryArgs(kWorker), env());
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("exited with code 1"), std::string::npos) << r.err;
}

TEST_F(KhorovodrunElasticTest, DiscoveryConflictsWithHostList) {
  const LauncherResult r = RunLauncher(
      {"-np", "1", "-H", "localhost:1", "--host-discovery-script", script_, "/bin/true"}, env());
  ASSERT_TRUE(r.finished);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(r.err.empty());
}

TEST_F(KhorovodrunElasticTest, WorkerExitingZeroIsNotReplacedAndALaterFailureFailsTheJob) {
  // worker-0 finishes first; then worker-1 fails, which must not be replaced
  // any more (the job is ending) and fails the job; worker-2 is terminated.
  const std::string worker =
      "trap 'echo term; exit 0' TERM; touch \"$TESTDIR/ready.$KHOROVOD_WORKER_NAME\"; "
      "case $KHOROVOD_WORKER_NAME in "
      "worker-0) echo finished; exit 0;; "
      "worker-1) " +
      WaitFileSh("fail1") +
      "exit 3;; "
      "*) " +
      WaitFileSh("finish") + "echo done;; esac";
  LauncherProcess p({"-np", "3", "--min-np", "1", "--max-np", "3", "--grace-period-ms", "20000",
                     "/bin/sh", "-c", worker},
                    env());
  ASSERT_TRUE(p.WaitUntil([&] {
    return p.err().find("worker 0 finished (exit 0)") != std::string::npos;
  })) << p.err();
  // worker-2 writes its ready file after installing its TERM trap; a SIGTERM
  // before that would kill it silently and the test would race.
  ASSERT_TRUE(p.WaitUntil([&] { return exists("ready.worker-1") && exists("ready.worker-2"); }))
      << p.err();
  touch("fail1");
  const LauncherResult r = p.wait();
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("rank 1 "), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("[2]<stdout>:term"), std::string::npos) << r.out;
  EXPECT_FALSE(exists("ready.worker-3")) << "a worker was started after one had finished";
}

TEST_F(KhorovodrunElasticTest, FailureBeforeAnyFinishIsReplaced) {
  const std::string worker =
      "touch \"$TESTDIR/ready.$KHOROVOD_WORKER_NAME\"; "
      "[ $KHOROVOD_WORKER_NAME = worker-1 ] && exit 3; " +
      WaitFileSh("finish") + "echo done";
  LauncherProcess p({"-np", "2", "--min-np", "1", "--max-np", "2", "/bin/sh", "-c", worker}, env());
  ASSERT_TRUE(p.WaitUntil([&] { return exists("ready.worker-2"); })) << p.err();
  touch("finish");
  const LauncherResult r = p.wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("worker 1 (pid"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("replacing it"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace khorovod::launcher::testing
