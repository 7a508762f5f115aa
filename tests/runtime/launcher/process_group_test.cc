// Unit tests of the launcher's process-level building blocks: ProcessGroup,
// SignalPipe and ScopedTempDir.
#include "process_group.h"

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

#include "scoped_temp_dir.h"
#include "signal_pipe.h"
#include "worker_env.h"

namespace khorovod::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// Reads a pipe to EOF (bounded by a deadline).
std::string read_all(int fd) {
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
std::vector<WorkerExit> wait_for_exits(ProcessGroup& group, std::size_t count) {
  std::vector<WorkerExit> exits;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (exits.size() < count && Clock::now() < deadline) {
    for (auto& e : group.poll_exits()) exits.push_back(e);
    if (exits.size() < count) ::poll(nullptr, 0, 5);
  }
  return exits;
}

TEST(ExitStatusTest, DescribesAndMapsToShellCodes) {
  const ExitStatus ok = ExitStatus::from_wait_status(W_EXITCODE(0, 0));
  EXPECT_TRUE(ok.success());
  EXPECT_EQ(ok.shell_code(), 0);
  const ExitStatus three = ExitStatus::from_wait_status(W_EXITCODE(3, 0));
  EXPECT_FALSE(three.success());
  EXPECT_EQ(three.shell_code(), 3);
  EXPECT_EQ(three.describe(), "exited with code 3");
  const ExitStatus killed = ExitStatus::from_wait_status(W_EXITCODE(0, SIGKILL));
  EXPECT_TRUE(killed.signaled);
  EXPECT_EQ(killed.shell_code(), 128 + SIGKILL);
  EXPECT_EQ(killed.describe().rfind("was killed by signal 9 (", 0), 0u) << killed.describe();
}

// stdin_data arrives on the worker's stdin, which stays open (no EOF) while
// the worker runs: a remote worker's ssh must not see its stdin close.
TEST(ProcessGroupTest, StdinDataArrivesAndStdinStaysOpen) {
  ProcessGroup group;
  WorkerSpec spec{1, {"sh", "-c", "read line; echo \"got $line\"; cat >/dev/null; echo eof"}, current_environment(),
                  "hello\n"};
  WorkerPipes pipes = group.spawn(spec);
  char buffer[64] = {};
  pollfd p{pipes.stdout_read.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  const ssize_t n = ::read(pipes.stdout_read.get(), buffer, sizeof buffer - 1);
  EXPECT_EQ(std::string(buffer, n > 0 ? static_cast<size_t>(n) : 0), "got hello\n");
  ::usleep(300000);
  EXPECT_TRUE(group.poll_exits().empty()) << "stdin reached EOF while the worker runs";
  EXPECT_EQ(group.signal_running(SIGKILL), 1u);
  EXPECT_EQ(wait_for_exits(group, 1).size(), 1u);
}

TEST(ProcessGroupTest, RunsWorkerWithEnvironmentAndReportsExit) {
  ProcessGroup group;
  WorkerSpec spec{7,
                  {"sh", "-c", "echo \"$GREETING\"; echo oops >&2; exit 4"},
                  merge_environment(current_environment(), {{"GREETING", "hi"}}),
                  {}};
  WorkerPipes pipes = group.spawn(spec);
  EXPECT_EQ(read_all(pipes.stdout_read.get()), "hi\n");
  EXPECT_EQ(read_all(pipes.stderr_read.get()), "oops\n");
  const auto exits = wait_for_exits(group, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].rank, 7);
  EXPECT_EQ(exits[0].pid, group.pid_of(0));
  EXPECT_EQ(exits[0].status.shell_code(), 4);
  EXPECT_TRUE(group.all_exited());
  EXPECT_TRUE(group.poll_exits().empty()) << "an exit is reported once";
  group.reap_exited();
}

TEST(ProcessGroupTest, WorkerRunsInItsOwnProcessGroupWithDevNullStdin) {
  ProcessGroup group;
  WorkerPipes pipes =
      group.spawn({0,
                   {"sh", "-c", "cut -d' ' -f5 /proc/$$/stat; echo $$; cat; echo end"},
                   current_environment(), {}});
  const std::string out = read_all(pipes.stdout_read.get());
  const auto nl = out.find('\n');
  ASSERT_NE(nl, std::string::npos) << out;
  const std::string pid = std::to_string(group.pid_of(0));
  EXPECT_EQ(out, pid + "\n" + pid + "\nend\n") << "pgid must equal pid; cat must see EOF";
}

TEST(ProcessGroupTest, MissingProgramThrowsSpawnErrorWith127) {
  ProcessGroup group;
  try {
    group.spawn({0, {"/nonexistent/program"}, current_environment(), {}});
    FAIL() << "spawn should have thrown";
  } catch (const SpawnError& e) {
    EXPECT_TRUE(e.exec_failed());
    EXPECT_EQ(e.error_number(), ENOENT);
    EXPECT_EQ(e.exit_code(), 127);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/program"), std::string::npos);
  }
  EXPECT_EQ(group.size(), 0u);
}

TEST(ProcessGroupTest, NonExecutableFileGives126) {
  ScopedTempDir dir("process-group-test-");
  const std::string path = dir.path() + "/not-executable";
  std::ofstream(path) << "#!/bin/sh\n";
  ProcessGroup group;
  try {
    group.spawn({0, {path}, current_environment(), {}});
    FAIL() << "spawn should have thrown";
  } catch (const SpawnError& e) {
    EXPECT_EQ(e.exit_code(), 126) << e.what();
  }
}

TEST(ProcessGroupTest, SignalRunningReachesTheWholeGroup) {
  ProcessGroup group;
  // The shell's child `sleep` would outlive a signal sent to the shell alone.
  WorkerPipes pipes =
      group.spawn({0, {"sh", "-c", "sleep 600; echo survived"}, current_environment(), {}});
  EXPECT_EQ(group.signal_running(SIGTERM), 1u);
  EXPECT_EQ(read_all(pipes.stdout_read.get()), "") << "EOF means every holder of the pipe died";
  const auto exits = wait_for_exits(group, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_TRUE(exits[0].status.signaled);
  EXPECT_EQ(exits[0].status.code, SIGTERM);
  EXPECT_EQ(group.signal_running(SIGTERM), 0u);
}

TEST(ProcessGroupTest, DestructorKillsAndReapsRunningWorkers) {
  pid_t pid = -1;
  {
    ProcessGroup group;
    group.spawn({0, {"sleep", "600"}, current_environment(), {}});
    pid = group.pid_of(0);
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
