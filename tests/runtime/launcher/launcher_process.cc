#include "launcher_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "launcher/worker_env.h"

#ifndef KHOROVODRUN_PATH
#error "KHOROVODRUN_PATH must be defined by the build"
#endif

namespace khorovod::launcher::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Between readiness checks; only bounds latency, never decides an outcome.
constexpr int kPollSliceMs = 10;

int RemainingMs(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

}  // namespace

LauncherProcess::LauncherProcess(const std::vector<std::string>& args,
                                 const std::vector<std::string>& extra_env) {
  std::vector<std::string> argv_strings{KHOROVODRUN_PATH};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<EnvVar> overrides;
  for (const auto& e : extra_env) {
    const auto eq = e.find('=');
    overrides.emplace_back(e.substr(0, eq), eq == std::string::npos ? "" : e.substr(eq + 1));
  }
  const std::vector<std::string> env_strings = MergeEnvironment(CurrentEnvironment(), overrides);

  std::vector<char*> argv;
  for (const auto& s : argv_strings) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& s : env_strings) envp.push_back(const_cast<char*>(s.c_str()));
  envp.push_back(nullptr);

  int out[2];
  int err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe2 failed");
  }
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(200);
  }
  ::close(out[1]);
  ::close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
}

LauncherProcess::~LauncherProcess() {
  if (!exit_code_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
  if (err_fd_ >= 0) ::close(err_fd_);
}

void LauncherProcess::pump(int timeout_ms) {
  pollfd fds[2];
  nfds_t n = 0;
  if (out_fd_ >= 0) fds[n++] = pollfd{out_fd_, POLLIN, 0};
  if (err_fd_ >= 0) fds[n++] = pollfd{err_fd_, POLLIN, 0};
  if (n == 0) {
    ::poll(nullptr, 0, timeout_ms);  // nothing to read; just let time pass
    return;
  }
  if (::poll(fds, n, timeout_ms) <= 0) return;
  for (nfds_t i = 0; i < n; ++i) {
    if (fds[i].revents == 0) continue;
    char buf[65536];
    const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
    std::string& sink = fds[i].fd == out_fd_ ? out_ : err_;
    if (got > 0) {
      sink.append(buf, static_cast<std::size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      int& fd = fds[i].fd == out_fd_ ? out_fd_ : err_fd_;
      ::close(fd);
      fd = -1;
    }
  }
}

bool LauncherProcess::TryReap() {
  if (exit_code_) return true;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
  exit_code_ = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  return true;
}

bool LauncherProcess::WaitUntil(const std::function<bool()>& ready,
                                std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!ready()) {
    if (Clock::now() >= deadline || TryReap()) return ready();
    pump(std::min(kPollSliceMs, RemainingMs(deadline)));
  }
  return true;
}

LauncherResult LauncherProcess::wait(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  // The output pipes reach EOF when the launcher exits (workers never hold
  // them), so reading to EOF first means no output is lost.
  while ((out_fd_ >= 0 || err_fd_ >= 0) && Clock::now() < deadline) {
    pump(std::min(100, RemainingMs(deadline)));
  }
  while (!TryReap() && Clock::now() < deadline) pump(kPollSliceMs);
  LauncherResult result;
  if (!exit_code_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    exit_code_ = 128 + SIGKILL;
  } else {
    result.finished = true;
  }
  result.exit_code = *exit_code_;
  result.out = out_;
  result.err = err_;
  return result;
}

LauncherResult RunLauncher(const std::vector<std::string>& args,
                           const std::vector<std::string>& extra_env,
                           std::chrono::milliseconds timeout) {
  LauncherProcess process(args, extra_env);
  return process.wait(timeout);
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const auto nl = text.find('\n', start);
    if (nl == std::string::npos) {
      lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

}  // namespace khorovod::launcher::testing
