// launcher_process.h - test harness that runs the real khorovodrun binary.
//
// Starts khorovodrun with the given arguments (and extra environment),
// collects its stdout/stderr and exit status. Every wait is bounded by a
// deadline so a hanging launcher fails the test instead of the CI job; the
// destructor SIGKILLs a launcher that is still running (its workers die with
// it through PR_SET_PDEATHSIG).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace khorovod::launcher::testing {

using namespace std::chrono_literals;

struct LauncherResult {
  bool finished = false;  // false: the deadline passed and it was killed
  int exit_code = -1;     // exit code, or 128 + signal
  std::string out;
  std::string err;
};

class LauncherProcess {
 public:
  LauncherProcess(const std::vector<std::string>& args,
                  const std::vector<std::string>& extra_env = {});
  LauncherProcess(const LauncherProcess&) = delete;
  LauncherProcess& operator=(const LauncherProcess&) = delete;
  ~LauncherProcess();

  pid_t pid() const { return pid_; }

  // Collects output while polling `ready` every few milliseconds; returns
  // true as soon as it holds, false if `timeout` passes or the launcher
  // exits first.
  bool WaitUntil(const std::function<bool()>& ready, std::chrono::milliseconds timeout = 20s);

  // Collects output until the launcher exits (or `timeout` passes, in which
  // case it is killed and `finished` is false).
  LauncherResult wait(std::chrono::milliseconds timeout = 30s);

  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

 private:
  // One poll(2) round over the output pipes, at most `timeout_ms`.
  void pump(int timeout_ms);
  bool TryReap();

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_;
  std::string err_;
  std::optional<int> exit_code_;
};

// Runs khorovodrun to completion.
LauncherResult RunLauncher(const std::vector<std::string>& args,
                           const std::vector<std::string>& extra_env = {},
                           std::chrono::milliseconds timeout = 30s);

// Splits text into lines (without the '\n'); a trailing partial line is kept.
std::vector<std::string> SplitLines(const std::string& text);

}  // namespace khorovod::launcher::testing
