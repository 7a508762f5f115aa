// ssh_command.h: the ssh command line, and the remote bootstrap run by a
// real /bin/sh here (it is what the remote login shell runs): environment
// and arguments arrive intact through stdin, the working directory is
// entered, the exit code is the program's, and closing stdin (ssh gone)
// terminates the program.
#include "launcher/ssh_command.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <string>
#include <vector>

namespace khorovod::launcher {
namespace {

using Args = std::vector<std::string>;

// The bootstrap under /bin/sh with `payload` on a stdin pipe that stays open
// until CloseStdin(); output collected from a pipe.
class Bootstrap {
 public:
  Bootstrap(const RemoteLaunch& launch) {
    int in[2], out[2];
    EXPECT_EQ(::pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::dup2(out[1], 2);
      ::execl("/bin/sh", "sh", "-c", launch.command.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    out_ = out[0];
    EXPECT_EQ(::write(stdin_, launch.stdin_payload.data(), launch.stdin_payload.size()),
              static_cast<ssize_t>(launch.stdin_payload.size()));
  }
  ~Bootstrap() {
    CloseStdin();
    if (out_ >= 0) ::close(out_);
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  void CloseStdin() {
    if (stdin_ >= 0) ::close(stdin_);
    stdin_ = -1;
  }
  // Reads until `text` appears or 10 s pass.
  bool WaitFor(const std::string& text) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (output_.find(text) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(out_, buffer, sizeof buffer);
      if (n <= 0) break;
      output_.append(buffer, static_cast<size_t>(n));
    }
    return output_.find(text) != std::string::npos;
  }
  // The wait status, or -1 if the process still runs after `ms`.
  int WaitExit(int ms = 10000) {
    for (int i = 0; i < ms / 10; ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return status;
      }
      ::usleep(10000);
    }
    return -1;
  }
  const std::string& output() const { return output_; }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  int out_ = -1;
  bool reaped_ = false;
  std::string output_;
};

TEST(SshCommandTest, ArgvCarriesHorovodrunsOptionsPortAndIdentity) {
  SshSettings s;
  s.program = "/usr/bin/ssh";
  s.port = 2222;
  s.identity_file = "/keys/id";
  s.connect_timeout = std::chrono::seconds(7);
  const Args argv = SshArgv(s, "host-1", "true", true);
  const std::string joined = [&] {
    std::string j;
    for (const auto& a : argv) j += a + " ";
    return j;
  }();
  EXPECT_EQ(argv.front(), "/usr/bin/ssh");
  for (const char* part :
       {"-o BatchMode=yes", "-o StrictHostKeyChecking=no", "-o PasswordAuthentication=no",
        "-o ConnectTimeout=7", "-o ServerAliveInterval=5", "-p 2222", "-i /keys/id",
        "-- host-1 true "}) {
    EXPECT_NE(joined.find(part), std::string::npos) << part << " in " << joined;
  }
  EXPECT_EQ(SshArgv(SshSettings{}, "h", "c", false),
            (Args{"ssh", "-T", "-o", "BatchMode=yes", "-o", "PasswordAuthentication=no", "-o",
                  "StrictHostKeyChecking=no", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=30",
                  "--", "h", "c"}));
}

TEST(SshCommandTest, ExportableFollowsHorovod) {
  EXPECT_TRUE(IsExportable("PATH"));
  EXPECT_FALSE(IsExportable("BASH_FUNC_foo%%"));
  EXPECT_FALSE(IsExportable("OLDPWD"));
  EXPECT_FALSE(IsExportable("CUDA_VISIBLE_DEVICES"));
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
}

TEST(SshCommandTest,
     EnvironmentArgumentsAndDirectoryArriveAndTheExitCodeIsTheProgramsAndNoSecretOnTheCommandLine) {
  const std::string dir = ::testing::TempDir();
  const RemoteLaunch launch = RemoteWorkerLaunch(
      {"SECRET_TOKEN=s3cr3t 'quoted' $HOME `x`", "MULTI=line one\nline two",
       "BASH_FUNC_f%%=() { :; }", "OLDPWD=/old", "bad.name=1"},
      dir,
      {"sh", "-c",
       "printf '[%s][%s][%s][%s]\\n' \"$SECRET_TOKEN\" \"$MULTI\" \"$(pwd)\" \"$1\"; exit 3", "x",
       "arg with 'quotes' and $dollar"},
      std::chrono::milliseconds(1000), "END-abc123");
  EXPECT_EQ(launch.command.find("s3cr3t"), std::string::npos);
  EXPECT_NE(launch.stdin_payload.find("s3cr3t"), std::string::npos);
  // Not exportable (Horovod's list) or not a shell name: not sent at all.
  for (const char* dropped : {"OLDPWD", "BASH_FUNC", "bad.name"}) {
    EXPECT_EQ(launch.stdin_payload.find(dropped), std::string::npos) << dropped;
  }
  Bootstrap run(launch);
  const std::string want = "[s3cr3t 'quoted' $HOME `x`][line one\nline two][" +
                           std::string(dir.back() == '/' ? dir.substr(0, dir.size() - 1) : dir) +
                           "][arg with 'quotes' and $dollar]";
  EXPECT_TRUE(run.WaitFor(want)) << run.output();
  const int status = run.WaitExit();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 3);
}

TEST(SshCommandTest, ClosingStdinTerminatesTheProgram) {
  const RemoteLaunch launch =
      RemoteWorkerLaunch({"PATH=/usr/bin:/bin"}, "/", {"sh", "-c", "echo started; exec sleep 60"},
                         std::chrono::milliseconds(1000), "END-def456");
  Bootstrap run(launch);
  ASSERT_TRUE(run.WaitFor("started")) << run.output();
  EXPECT_EQ(run.WaitExit(500), -1) << "the program must keep running while stdin is open";
  run.CloseStdin();
  const auto start = std::chrono::steady_clock::now();
  const int status = run.WaitExit();
  ASSERT_NE(status, -1) << "still running 10 s after its stdin closed";
  // SIGTERM ended it; /bin/sh here may report that as its own exit 143
  // (an ssh login shell execs the command, so there it is the signal).
  EXPECT_TRUE((WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) ||
              (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM))
      << status;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace khorovod::launcher
