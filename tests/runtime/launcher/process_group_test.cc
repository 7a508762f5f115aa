// Unit tests of the launcher's process-level building blocks: ProcessGroup,
// SignalPipe and ScopedTempDir.
#include "launcher/process_group.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "launcher/scoped_temp_dir.h"
#include "launcher/signal_pipe.h"
#include "launcher/worker_env.h"

namespace khorovod::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// Reads a pipe to EOF (bounded by a deadline).
// A spawn the test needs: a failure ends the test with its Status.
WorkerPipes SpawnOrDie(ProcessGroup& group, const WorkerSpec& spec) {
  StatusOr<WorkerPipes> spawned = group.Spawn(spec);
  if (!spawned.ok()) {
    ADD_FAILURE() << spawned.status().message();
    return {};
  }
  return std::move(*spawned);
}

std::string ReadAll(int fd) {
  std::string text;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, 100);
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n > 0) text.append(buf, static_cast<std::size_t>(n));
  }
  return text;
}

// Polls for an exit with a deadline; exits are noticed without SIGCHLD here.
std::vector<WorkerExit> WaitForExits(ProcessGroup& group, std::size_t count) {
  std::vector<WorkerExit> exits;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (exits.size() < count && Clock::now() < deadline) {
    for (auto& e : group.PollExits()) exits.push_back(e);
    if (exits.size() < count) ::poll(nullptr, 0, 5);
  }
  return exits;
}

TEST(ExitStatusTest, DescribesAndMapsToShellCodes) {
  const ExitStatus ok = ExitStatus::FromWaitStatus(W_EXITCODE(0, 0));
  EXPECT_TRUE(ok.Success());
  EXPECT_EQ(ok.ShellCode(), 0);
  const ExitStatus three = ExitStatus::FromWaitStatus(W_EXITCODE(3, 0));
  EXPECT_FALSE(three.Success());
  EXPECT_EQ(three.ShellCode(), 3);
  EXPECT_EQ(three.Describe(), "exited with code 3");
  const ExitStatus killed = ExitStatus::FromWaitStatus(W_EXITCODE(0, SIGKILL));
  EXPECT_TRUE(killed.signaled);
  EXPECT_EQ(killed.ShellCode(), 128 + SIGKILL);
  EXPECT_EQ(killed.Describe().rfind("was killed by signal 9 (", 0), 0u) << killed.Describe();
}

// stdin_data arrives on the worker's stdin, which stays open (no EOF) while
// the worker runs: a remote worker's ssh must not see its stdin close.
TEST(ProcessGroupTest, StdinDataArrivesAndStdinStaysOpen) {
  ProcessGroup group;
  WorkerSpec spec{1,
                  {"sh", "-c", "read line; echo \"got $line\"; cat >/dev/null; echo eof"},
                  CurrentEnvironment(),
                  "hello\n"};
  WorkerPipes pipes = SpawnOrDie(group, spec);
  char buffer[64] = {};
  pollfd p{pipes.stdout_read.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  const ssize_t n = ::read(pipes.stdout_read.get(), buffer, sizeof buffer - 1);
  EXPECT_EQ(std::string(buffer, n > 0 ? static_cast<size_t>(n) : 0), "got hello\n");
  ::usleep(300000);
  EXPECT_TRUE(group.PollExits().empty()) << "stdin reached EOF while the worker runs";
  EXPECT_EQ(group.SignalRunning(SIGKILL), 1u);
  EXPECT_EQ(WaitForExits(group, 1).size(), 1u);
}

TEST(ProcessGroupTest, RunsWorkerWithEnvironmentAndReportsExit) {
  ProcessGroup group;
  WorkerSpec spec{7,
                  {"sh", "-c", "echo \"$GREETING\"; echo oops >&2; exit 4"},
                  MergeEnvironment(CurrentEnvironment(), {{"GREETING", "hi"}}),
                  {}};
  WorkerPipes pipes = SpawnOrDie(group, spec);
  EXPECT_EQ(ReadAll(pipes.stdout_read.get()), "hi\n");
  EXPECT_EQ(ReadAll(pipes.stderr_read.get()), "oops\n");
  const auto exits = WaitForExits(group, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].rank, 7);
  EXPECT_EQ(exits[0].pid, group.PidOf(0));
  EXPECT_EQ(exits[0].status.ShellCode(), 4);
  EXPECT_TRUE(group.AllExited());
  EXPECT_TRUE(group.PollExits().empty()) << "an exit is reported once";
  group.ReapExited();
}

TEST(ProcessGroupTest, WorkerRunsInItsOwnProcessGroupWithDevNullStdin) {
  ProcessGroup group;
  WorkerPipes pipes =
      SpawnOrDie(group, {0,
                         {"sh", "-c", "cut -d' ' -f5 /proc/$$/stat; echo $$; cat; echo end"},
                         CurrentEnvironment(),
                         {}});
  const std::string out = ReadAll(pipes.stdout_read.get());
  const auto nl = out.find('\n');
  ASSERT_NE(nl, std::string::npos) << out;
  const std::string pid = std::to_string(group.PidOf(0));
  EXPECT_EQ(out, pid + "\n" + pid + "\nend\n") << "pgid must equal pid; cat must see EOF";
}

TEST(ProcessGroupTest, MissingProgramIsInvalidArgumentWith127) {
  ProcessGroup group;
  StatusOr<WorkerPipes> spawned =
      group.Spawn({0, {"/nonexistent/program"}, CurrentEnvironment(), {}});
  ASSERT_FALSE(spawned.ok());
  EXPECT_EQ(spawned.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SpawnFailureExitCode(spawned.status()), 127);
  EXPECT_NE(spawned.status().message().find("/nonexistent/program"), std::string::npos);
  EXPECT_NE(spawned.status().message().find("No such file"), std::string::npos);
  EXPECT_EQ(group.size(), 0u);
}

TEST(ProcessGroupTest, NonExecutableFileGives126) {
  ScopedTempDir dir("process-group-test-");
  const std::string path = dir.path() + "/not-executable";
  std::ofstream(path) << "#!/bin/sh\n";
  ProcessGroup group;
  StatusOr<WorkerPipes> spawned = group.Spawn({0, {path}, CurrentEnvironment(), {}});
  ASSERT_FALSE(spawned.ok());
  EXPECT_EQ(spawned.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(SpawnFailureExitCode(spawned.status()), 126) << spawned.status().message();
}

TEST(ProcessGroupTest, EmptyCommandIsRefused) {
  ProcessGroup group;
  StatusOr<WorkerPipes> spawned = group.Spawn({0, {}, CurrentEnvironment(), {}});
  ASSERT_FALSE(spawned.ok());
  EXPECT_EQ(spawned.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(group.size(), 0u);
}

TEST(ProcessGroupTest, SignalRunningReachesTheWholeGroup) {
  ProcessGroup group;
  // The shell's child `sleep` would outlive a signal sent to the shell alone.
  WorkerPipes pipes =
      SpawnOrDie(group, {0, {"sh", "-c", "sleep 600; echo survived"}, CurrentEnvironment(), {}});
  EXPECT_EQ(group.SignalRunning(SIGTERM), 1u);
  EXPECT_EQ(ReadAll(pipes.stdout_read.get()), "") << "EOF means every holder of the pipe died";
  const auto exits = WaitForExits(group, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_TRUE(exits[0].status.signaled);
  EXPECT_EQ(exits[0].status.code, SIGTERM);
  EXPECT_EQ(group.SignalRunning(SIGTERM), 0u);
}

TEST(ProcessGroupTest, DestructorKillsAndReapsRunningWorkers) {
  pid_t pid = -1;
  {
    ProcessGroup group;
    SpawnOrDie(group, {0, {"sleep", "600"}, CurrentEnvironment(), {}});
    pid = group.PidOf(0);
    EXPECT_EQ(::kill(pid, 0), 0);
  }
  errno = 0;
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH) << "worker must be killed and reaped, not left as a zombie";
}

TEST(SignalPipeTest, DeliversSignalNumbersAndRestoresHandlers) {
  struct sigaction before {};
  ::sigaction(SIGUSR1, nullptr, &before);
  {
    SignalPipe pipe({SIGUSR1, SIGUSR2});
    EXPECT_THROW(SignalPipe second({SIGUSR1}), std::logic_error);
    EXPECT_TRUE(pipe.drain().empty());
    ::raise(SIGUSR2);
    ::raise(SIGUSR1);
    pollfd p{pipe.fd(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 5000), 1);
    EXPECT_EQ(pipe.drain(), (std::vector<int>{SIGUSR2, SIGUSR1}));
  }
  struct sigaction after {};
  ::sigaction(SIGUSR1, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
  SignalPipe again({SIGUSR1});  // the global slot was released
}

TEST(ScopedTempDirTest, PrivateDirectoryUnderTmpdirRemovedWithContents) {
  ScopedTempDir parent("scoped-temp-dir-test-");
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old ? old : "";
  ::setenv("TMPDIR", (parent.path() + "/").c_str(), 1);
  std::string path;
  {
    ScopedTempDir dir("khorovod-store-");
    path = dir.path();
    EXPECT_EQ(path.rfind(parent.path() + "/khorovod-store-", 0), 0u) << path;
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    std::filesystem::create_directories(path + "/sub/dir");
    std::ofstream(path + "/sub/dir/file") << "data";
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  if (old) {
    ::setenv("TMPDIR", saved.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
}

}  // namespace
}  // namespace khorovod::launcher
