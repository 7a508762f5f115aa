// TerminationWatch, in forked children: SIGTERM runs the departure callback
// and still ends the process as SIGTERM does, also as PID 1 of a PID
// namespace (a container's trainer), where an unhandled SIGTERM is ignored.
// A program's own SIGTERM handler is left alone.
#include "bootstrap/termination_watch.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <thread>

namespace khorovod {
namespace {

// Waits for `pid` at most ~10 s; kills it if it is still running.
int WaitBounded(pid_t pid) {
  int status = 0;
  for (int i = 0; i < 1000; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  ADD_FAILURE() << "child still running after 10 s";
  return status;
}

// In the child: installs a watch whose callback writes 'L' to `fd`, sends
// itself SIGTERM and waits to be ended. Exits 99 if it was not.
[[noreturn]] void ChildThatLeavesOnSigterm(int fd) {
  auto watch = TerminationWatch::Install([fd] { (void)!write(fd, "L", 1); });
  if (!watch) _exit(98);
  kill(getpid(), SIGTERM);
  for (int i = 0; i < 500; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  _exit(99);
}

char ReadMarker(int fd) {
  char c = 0;
  return read(fd, &c, 1) == 1 ? c : 0;
}

TEST(TerminationWatch, SigtermLeavesThenEndsTheProcessBySigterm) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    ChildThatLeavesOnSigterm(fds[1]);
  }
  close(fds[1]);
  int status = WaitBounded(pid);
  EXPECT_EQ(ReadMarker(fds[0]), 'L');
  close(fds[0]);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST(TerminationWatch, AsPidOneItExitsWith143) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t outer = fork();
  ASSERT_GE(outer, 0);
  if (outer == 0) {
    close(fds[0]);
    if (unshare(CLONE_NEWPID) != 0) _exit(97);  // needs root
    pid_t init = fork();
    if (init < 0) _exit(96);
    if (init == 0) ChildThatLeavesOnSigterm(fds[1]);  // PID 1 of the new namespace
    int status = 0;
    waitpid(init, &status, 0);
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 95);
  }
  close(fds[1]);
  int status = WaitBounded(outer);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 97) {
    close(fds[0]);
    GTEST_SKIP() << "unshare(CLONE_NEWPID) needs root";
  }
  EXPECT_EQ(ReadMarker(fds[0]), 'L');
  close(fds[0]);
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
}

TEST(TerminationWatch, LeavesAProgramsOwnHandlerAlone) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::signal(SIGTERM, SIG_IGN);
    auto watch = TerminationWatch::Install([] {});
    _exit(watch ? 1 : 0);
  }
  int status = WaitBounded(pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(TerminationWatch, OneAtATimeAndDefaultRestored) {
  auto first = TerminationWatch::Install([] {});
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(TerminationWatch::Install([] {}), nullptr);
  first.reset();
  struct sigaction current {};
  ASSERT_EQ(sigaction(SIGTERM, nullptr, &current), 0);
  EXPECT_EQ(current.sa_handler, SIG_DFL);
  EXPECT_NE(TerminationWatch::Install([] {}), nullptr);
}

}  // namespace
}  // namespace khorovod
