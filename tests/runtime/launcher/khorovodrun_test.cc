// End-to-end tests of the khorovodrun binary with small /bin/sh workers.
//
// No test waits on a clock to be correct: readiness is signalled through
// files (polled with a deadline), waits on workers are bounded inside the
// scripts too, and a worker that "would sleep 600 s" can only finish quickly
// if the launcher really terminated it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "launcher_process.h"

namespace khorovod::launcher::testing {
namespace {

namespace fs = std::filesystem;

class KhorovodrunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/khorovodrun-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    dir_ = pattern;
  }

  void TearDown() override {
    // Whatever happened, the launcher must not have left its store behind.
    for (const auto& entry : fs::directory_iterator(dir_)) {
      EXPECT_EQ(entry.path().filename().string().rfind("khorovod-store-", 0), std::string::npos)
          << "store directory left behind: " << entry.path();
    }
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  // The launcher keeps its store under TMPDIR=dir_; TESTDIR tells the shell
  // workers where to drop readiness and pid files.
  std::vector<std::string> env() const { return {"TMPDIR=" + dir_, "TESTDIR=" + dir_}; }

  LauncherResult run(const std::vector<std::string>& args) { return RunLauncher(args, env()); }

  static std::vector<std::string> sh(const std::string& script) {
    return {"/bin/sh", "-c", script};
  }

  static std::vector<std::string> cat(std::vector<std::string> a,
                                      const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  bool exists(const std::string& name) const { return fs::exists(dir_ + "/" + name); }

  pid_t ReadPid(const std::string& name) const {
    std::ifstream in(dir_ + "/" + name);
    pid_t pid = -1;
    in >> pid;
    return pid;
  }

  std::string dir_;
};

// Bounded wait inside a worker script until all files exist (20 s max);
// exits 99 on timeout so a broken test fails loudly instead of hanging.
std::string WaitForFilesSh(const std::string& files) {
  return "n=0; for f in " + files +
         "; do while [ ! -e \"$TESTDIR/$f\" ]; do n=$((n+1)); "
         "[ $n -gt 2000 ] && exit 99; sleep 0.01; done; done; ";
}

// Publishes this worker's pid atomically (write, then rename).
const char* kPublishPid =
    "echo $$ > \"$TESTDIR/pid.$KHOROVOD_RANK.tmp\" && "
    "mv \"$TESTDIR/pid.$KHOROVOD_RANK.tmp\" \"$TESTDIR/pid.$KHOROVOD_RANK\"; ";

void ExpectProcessGone(pid_t pid) {
  ASSERT_GT(pid, 0);
  errno = 0;
  EXPECT_EQ(::kill(pid, 0), -1) << "worker " << pid << " still exists";
  EXPECT_EQ(errno, ESRCH);
}

// Maps "[rank]<stdout>:KEY=VALUE" lines to per-rank variables.
std::map<int, std::map<std::string, std::string>> ParseEnvDump(const std::string& out) {
  static const std::regex line_re(R"(^\[(\d+)\]<stdout>:(KHOROVOD_[A-Z_]+)=(.*)$)");
  std::map<int, std::map<std::string, std::string>> vars;
  for (const auto& line : SplitLines(out)) {
    std::smatch m;
    if (std::regex_match(line, m, line_re)) vars[std::stoi(m[1])][m[2]] = m[3];
  }
  return vars;
}

TEST_F(KhorovodrunTest, SetsContractEnvironmentForEveryRank) {
  const auto r = run(cat({"-np", "3"}, sh("env | grep '^KHOROVOD_'; "
                                          "test -d \"$KHOROVOD_STORE_PATH\" && echo STORE_OK; "
                                          "touch \"$KHOROVOD_STORE_PATH/rank$KHOROVOD_RANK\"")));
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto vars = ParseEnvDump(r.out);
  ASSERT_EQ(vars.size(), 3u) << r.out;
  const std::string job_id = vars.at(0).at("KHOROVOD_JOB_ID");
  const std::string store = vars.at(0).at("KHOROVOD_STORE_PATH");
  EXPECT_TRUE(std::regex_match(job_id, std::regex("[0-9a-f]{16}"))) << job_id;
  EXPECT_EQ(store.rfind(dir_ + "/khorovod-store-", 0), 0u) << store;
  for (int rank = 0; rank < 3; ++rank) {
    const auto& v = vars.at(rank);
    EXPECT_EQ(v.size(), 9u);
    EXPECT_EQ(v.at("KHOROVOD_RANK"), std::to_string(rank));
    EXPECT_EQ(v.at("KHOROVOD_SIZE"), "3");
    EXPECT_EQ(v.at("KHOROVOD_LOCAL_RANK"), std::to_string(rank));
    EXPECT_EQ(v.at("KHOROVOD_LOCAL_SIZE"), "3");
    EXPECT_EQ(v.at("KHOROVOD_CROSS_RANK"), "0");
    EXPECT_EQ(v.at("KHOROVOD_CROSS_SIZE"), "1");
    EXPECT_EQ(v.at("KHOROVOD_STORE_PATH"), store);
    EXPECT_EQ(v.at("KHOROVOD_JOB_ID"), job_id);
    EXPECT_EQ(v.at("KHOROVOD_HOSTNAME"), "127.0.0.1");
    EXPECT_NE(r.out.find("[" + std::to_string(rank) + "]<stdout>:STORE_OK\n"), std::string::npos);
  }
  // Removed at exit even though the workers wrote files into it.
  EXPECT_FALSE(fs::exists(store));
}

TEST_F(KhorovodrunTest, JobIdAndHostnameOptionsReachWorkers) {
  const auto r = run(cat({"-np", "2", "--job-id", "my-job.7", "--hostname", "10.1.2.3"},
                         sh("echo \"$KHOROVOD_JOB_ID $KHOROVOD_HOSTNAME\"")));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[0]<stdout>:my-job.7 10.1.2.3\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1]<stdout>:my-job.7 10.1.2.3\n"), std::string::npos) << r.out;
}

TEST_F(KhorovodrunTest, ExtraEnvironmentSetAndPassedThrough) {
  LauncherProcess p(cat({"-np", "2", "-x", "FOO=bar", "-x", "PASSED", "-x", "EQ=a=b", "-x",
                         "OVERRIDDEN=new", "-x", "EMPTY="},
                        sh("echo \"$FOO|$PASSED|$EQ|$OVERRIDDEN|${EMPTY-unset}|\"")),
                    cat(env(), {"PASSED=from launcher", "OVERRIDDEN=old"}));
  const auto r = p.wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* rank : {"0", "1"}) {
    EXPECT_NE(r.out.find(std::string("[") + rank + "]<stdout>:bar|from launcher|a=b|new||\n"),
              std::string::npos)
        << r.out;
  }
}

TEST_F(KhorovodrunTest, ProgramArgumentsPassedVerbatim) {
  const auto r = run({"-np", "1", "/bin/sh", "-c", "for a in \"$@\"; do echo \"<$a>\"; done", "sh",
                      "--steps", "10", "-np", "3", "-x", "Y", "--", "[1,2]", "{}", ""});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "[0]<stdout>:<--steps>\n[0]<stdout>:<10>\n[0]<stdout>:<-np>\n[0]<stdout>:<3>\n"
            "[0]<stdout>:<-x>\n[0]<stdout>:<Y>\n[0]<stdout>:<-->\n[0]<stdout>:<[1,2]>\n"
            "[0]<stdout>:<{}>\n[0]<stdout>:<>\n");
}

TEST_F(KhorovodrunTest, PrefixesEveryLineWithoutInterleaving) {
  constexpr int kRanks = 4;
  constexpr int kLines = 200;
  const std::string pad(300, 'x');  // long lines make a mid-line split likely if it could happen
  const auto r = run(cat({"-np", std::to_string(kRanks), "-x", "PAD=" + pad},
                         sh("i=0; while [ $i -lt " + std::to_string(kLines) +
                            " ]; do "
                            "echo \"out $KHOROVOD_RANK $i $PAD\"; "
                            "echo \"err $KHOROVOD_RANK $i $PAD\" >&2; i=$((i+1)); done; "
                            "printf 'tail-without-newline'; printf 'err-tail' >&2")));
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exit_code, 0) << r.err.substr(0, 2000);

  for (const std::string stream : {"stdout", "stderr"}) {
    const std::string& text = stream == "stdout" ? r.out : r.err;
    const std::string word = stream == "stdout" ? "out" : "err";
    const std::string tail = stream == "stdout" ? "tail-without-newline" : "err-tail";
    ASSERT_FALSE(text.empty());
    EXPECT_EQ(text.back(), '\n') << "the final partial line must be flushed with a newline";
    const std::regex line_re("^\\[(\\d)\\]<" + stream + ">:(?:" + word + " (\\d) (\\d+) " + pad +
                             "|(" + tail + "))$");
    std::vector<int> next(kRanks, 0);
    std::vector<bool> saw_tail(kRanks, false);
    for (const auto& line : SplitLines(text)) {
      std::smatch m;
      ASSERT_TRUE(std::regex_match(line, m, line_re)) << stream << " line: " << line.substr(0, 400);
      const int rank = std::stoi(m[1]);
      ASSERT_LT(rank, kRanks);
      ASSERT_FALSE(saw_tail[rank]) << "line after the final partial line of rank " << rank;
      if (m[4].matched) {
        saw_tail[rank] = true;
        continue;
      }
      EXPECT_EQ(std::stoi(m[2]), rank) << "prefix and payload disagree: " << line.substr(0, 80);
      EXPECT_EQ(std::stoi(m[3]), next[rank]) << "lines out of order for rank " << rank;
      next[rank] = std::stoi(m[3]) + 1;
    }
    for (int rank = 0; rank < kRanks; ++rank) {
      EXPECT_EQ(next[rank], kLines) << stream << " rank " << rank;
      EXPECT_TRUE(saw_tail[rank]) << stream << " rank " << rank;
    }
  }
}

TEST_F(KhorovodrunTest, FailingRankFailsJobAndOthersAreTerminated) {
  // The survivors report SIGTERM; the long grace period means only a real
  // SIGTERM (not the SIGKILL escalation) can end them within the deadline.
  const auto r = run(cat({"-np", "3", "--grace-period-ms", "20000"},
                         sh("if [ \"$KHOROVOD_RANK\" = 1 ]; then " + WaitForFilesSh("pid.0 pid.2") +
                            "echo failing; exit 3; fi; "
                            "trap 'echo got TERM; kill $! 2>/dev/null; exit 0' TERM; " +
                            kPublishPid + "sleep 600 & wait")));
  ASSERT_TRUE(r.finished) << "launcher did not terminate the sleeping workers";
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("rank 1 "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("exited with code 3"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("SIGKILL"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("[1]<stdout>:failing\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[0]<stdout>:got TERM\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[2]<stdout>:got TERM\n"), std::string::npos) << r.out;
  ExpectProcessGone(ReadPid("pid.0"));
  ExpectProcessGone(ReadPid("pid.2"));
}

TEST_F(KhorovodrunTest, WorkerIgnoringSigtermIsKilledAfterGracePeriod) {
  const auto r = run(cat({"-np", "2", "--grace-period-ms", "100"},
                         sh("if [ \"$KHOROVOD_RANK\" = 0 ]; then " + WaitForFilesSh("pid.1") +
                            "exit 5; fi; trap '' TERM; " + kPublishPid + "exec sleep 600")));
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_NE(r.err.find("sending SIGKILL"), std::string::npos) << r.err;
  ExpectProcessGone(ReadPid("pid.1"));
}

TEST_F(KhorovodrunTest, RankKilledBySignalGives128PlusSignal) {
  const auto r = run(cat({"-np", "2"}, sh("if [ \"$KHOROVOD_RANK\" = 1 ]; then "
                                          "kill -USR1 $$; fi; exec sleep 600")));
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exit_code, 128 + SIGUSR1) << r.err;
  EXPECT_NE(r.err.find("rank 1 "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("killed by signal " + std::to_string(SIGUSR1)), std::string::npos) << r.err;
}

class KhorovodrunSignalTest : public KhorovodrunTest, public ::testing::WithParamInterface<int> {};

TEST_P(KhorovodrunSignalTest, ForwardsSignalToAllWorkers) {
  const int sig = GetParam();
  const std::string name = sig == SIGINT ? "INT" : "TERM";
  // The trap is armed before the readiness file appears, so the signal
  // cannot arrive too early. `kill $!` stops the background sleep, which
  // a non-interactive shell starts with SIGINT ignored.
  LauncherProcess p(
      cat({"-np", "2"}, sh("trap 'echo got " + name + "; kill $! 2>/dev/null; exit 0' " + name +
                           "; touch \"$TESTDIR/ready.$KHOROVOD_RANK\"; sleep 600 & wait")),
      env());
  ASSERT_TRUE(p.WaitUntil([&] { return exists("ready.0") && exists("ready.1"); })) << p.err();
  ASSERT_EQ(::kill(p.pid(), sig), 0);
  const auto r = p.wait();
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exit_code, 128 + sig) << r.err;
  EXPECT_NE(r.out.find("[0]<stdout>:got " + name + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1]<stdout>:got " + name + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("received SIG" + name), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(IntAndTerm, KhorovodrunSignalTest, ::testing::Values(SIGINT, SIGTERM),
                         [](const auto& info) {
                           return info.param == SIGINT ? "Sigint" : "Sigterm";
                         });

TEST_F(KhorovodrunTest, ProgramNotFoundExits127) {
  for (const std::string program : {"/nonexistent/khorovod-worker", "khorovod-no-such-program"}) {
    const auto r = run({"-np", "2", program, "--flag"});
    ASSERT_TRUE(r.finished);
    EXPECT_EQ(r.exit_code, 127) << program;
    EXPECT_NE(r.err.find("cannot execute '" + program + "'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("No such file or directory"), std::string::npos) << r.err;
  }
}

TEST_F(KhorovodrunTest, HelpExitsZero) {
  const auto r = run({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--np"), std::string::npos) << r.out;
}

class KhorovodrunBadArgsTest : public KhorovodrunTest,
                               public ::testing::WithParamInterface<std::vector<std::string>> {};

TEST_P(KhorovodrunBadArgsTest, RejectedWithoutRunningAnything) {
  std::vector<std::string> args = GetParam();
  for (auto& a : args) {
    if (a == "@TOUCH") a = dir_ + "/ran";  // the program would create this file
  }
  const auto r = run(args);
  ASSERT_TRUE(r.finished);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(r.err.empty());
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_FALSE(exists("ran"));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, KhorovodrunBadArgsTest,
    ::testing::Values(
        std::vector<std::string>{},                                 //
        std::vector<std::string>{"touch", "@TOUCH"},                // no -np
        std::vector<std::string>{"-np", "0", "touch", "@TOUCH"},    //
        std::vector<std::string>{"-np", "-2", "touch", "@TOUCH"},   //
        std::vector<std::string>{"-np", "two", "touch", "@TOUCH"},  //
        std::vector<std::string>{"-np", "2"},                       // no program
        std::vector<std::string>{"-np", "2", "--"},                 //
        std::vector<std::string>{"-np", "2", "--bogus", "touch", "@TOUCH"},
        std::vector<std::string>{"-np", "2", "-x", "1BAD=x", "touch", "@TOUCH"},
        std::vector<std::string>{"-np", "2", "-x", "KHOROVOD_RANK=7", "touch", "@TOUCH"},
        std::vector<std::string>{"-np", "2", "--grace-period-ms", "-1", "touch", "@TOUCH"},
        std::vector<std::string>{"-np", "2", "--job-id", "a/b", "touch", "@TOUCH"}));

}  // namespace
}  // namespace khorovod::launcher::testing
