// The khorovod-rendezvous executable: refuses to start without a token,
// prints its listening line, serves, and exits 0 on SIGTERM and SIGINT.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <regex>
#include <string>
#include <vector>

#include "test_server.h"

#ifndef KHOROVOD_RENDEZVOUS_BINARY
#error "KHOROVOD_RENDEZVOUS_BINARY must name the server executable"
#endif

namespace khorovod::rendezvous {
namespace {

using Clock = std::chrono::steady_clock;

struct Child {
  pid_t pid = -1;
  int out_fd = -1;  // stdout+stderr
};

Child Spawn(const std::vector<std::string>& args, const std::string& token_env) {
  // Everything the child needs is prepared before fork(): it only execs.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    if (std::string(*e).rfind("KHOROVOD_RENDEZVOUS_TOKEN=", 0) != 0) env_strings.emplace_back(*e);
  }
  if (!token_env.empty()) env_strings.push_back("KHOROVOD_RENDEZVOUS_TOKEN=" + token_env);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> arg_strings = {KHOROVOD_RENDEZVOUS_BINARY};
  arg_strings.insert(arg_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : arg_strings) argv.push_back(a.data());
  argv.push_back(nullptr);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(fds[1]);
  return {pid, fds[0]};
}

// Reads from fd until `stop` matches the text read so far, EOF, or the deadline.
std::string ReadUntil(int fd, const std::regex& stop, std::chrono::milliseconds timeout) {
  std::string text;
  auto deadline = Clock::now() + timeout;
  char buf[1024];
  while (!std::regex_search(text, stop)) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) break;
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

// The exit status, or -1 if the child did not exit within the timeout (it is then killed).
int WaitExit(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    usleep(1000);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(ServerBinary, RefusesToStartWithoutAToken) {
  Child c = Spawn({"--job", "j"}, "");
  ASSERT_GT(c.pid, 0);
  std::string out = ReadUntil(c.out_fd, std::regex("\\n"), std::chrono::seconds(30));
  EXPECT_EQ(WaitExit(c.pid, std::chrono::seconds(30)), 2);
  EXPECT_NE(out.find("KHOROVOD_RENDEZVOUS_TOKEN"), std::string::npos) << out;
  close(c.out_fd);
}

TEST(ServerBinary, ServesAndStopsCleanlyOnSignals) {
  const std::string token_file = ::testing::TempDir() + "/rdzv-token";
  std::ofstream(token_file) << "  file-token\n";
  for (int sig : {SIGTERM, SIGINT}) {
    Child c = Spawn({"--job", "job1", "--port", "0", "--token-file", token_file, "--min-workers",
                     "2", "--settle-ms", "10", "--quiet"},
                    "env-token-ignored");
    ASSERT_GT(c.pid, 0);
    std::regex listening(R"(khorovod-rendezvous listening on 127\.0\.0\.1:(\d+)\n)");
    std::string out = ReadUntil(c.out_fd, listening, std::chrono::seconds(30));
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out, m, listening)) << out;
    int port = std::stoi(m[1]);
    EXPECT_EQ(testing::Send(port, "GET", "/healthz", "", std::nullopt).status, 200);
    auto reg = testing::Send(port, "POST", "/v1/jobs/job1/workers",
                             R"({"name":"w","address":"h","slots":1})", std::string("file-token"));
    EXPECT_EQ(reg.status, 200) << reg.text;
    EXPECT_EQ(testing::Send(port, "GET", "/metrics", "", std::string("env-token-ignored")).status,
              401);
    // A long-poll in flight must not delay the shutdown.
    auto poll = std::async(std::launch::async, [&] {
      return testing::Send(port, "POST", "/v1/jobs/job1/workers/w/generation",
                           R"({"after":0,"timeout_ms":30000})", std::string("file-token"));
    });
    ASSERT_EQ(kill(c.pid, sig), 0);
    EXPECT_EQ(WaitExit(c.pid, std::chrono::seconds(20)), 0) << "signal " << sig;
    poll.wait();
    close(c.out_fd);
  }
}

TEST(ServerBinary, RejectsBadFlags) {
  Child c = Spawn({"--job", "j", "--min-workers", "3", "--max-workers", "2"}, "tok");
  ASSERT_GT(c.pid, 0);
  std::string out = ReadUntil(c.out_fd, std::regex("\\n"), std::chrono::seconds(30));
  EXPECT_EQ(WaitExit(c.pid, std::chrono::seconds(30)), 2);
  EXPECT_NE(out.find("max-workers"), std::string::npos) << out;
  close(c.out_fd);
}

}  // namespace
}  // namespace khorovod::rendezvous
