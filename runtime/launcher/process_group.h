// process_group.h - spawn, track, signal and reap the worker processes.
//
// Contract:
//  * spawn() forks and execs one worker. The worker runs in its own process
//    group (pgid == its pid) so that signals reach everything it starts
//    (shell pipelines, data-loader subprocesses) and a terminal's Ctrl-C is
//    delivered once, by the launcher, instead of twice. Its stdin is
//    /dev/null, its stdout/stderr are fresh pipes whose read ends (O_CLOEXEC,
//    O_NONBLOCK) are returned to the caller (stdin: WorkerSpec::stdin_data). The worker also gets
//    PR_SET_PDEATHSIG=SIGKILL so it does not outlive a launcher that was
//    itself SIGKILLed.
//  * If exec fails (program not found, not executable) spawn() reports it
//    synchronously by throwing SpawnError: an O_CLOEXEC pipe carries the
//    child's errno back, so the caller never has to guess from an exit code.
//  * poll_exits() notices exits with waitid(WNOWAIT): an exited worker stays
//    a zombie until reap_exited()/the destructor. Keeping the zombie reserves
//    its pid and therefore its process-group id, which is what makes it safe
//    to signal the group later (to clean up stragglers the worker left
//    behind) without ever hitting an unrelated process that reused the pid.
//  * The destructor SIGKILLs every worker group not yet reaped and reaps
//    them, so no exit path leaves orphans or zombies.
//
// Thread-safety: none. One thread owns a ProcessGroup and makes all calls.
// spawn() only uses async-signal-safe calls between fork and exec, so it is
// also correct in a multi-threaded process, but concurrent calls are not.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "unique_fd.h"

namespace khorovod::launcher {

// How a worker ended.
struct ExitStatus {
  bool signaled = false;  // false: exited normally
  int code = 0;           // exit code, or the signal number when `signaled`

  bool success() const { return !signaled && code == 0; }
  // Shell convention: the exit code, or 128 + signal number.
  int shell_code() const { return signaled ? 128 + code : code; }
  // "exited with code 3" / "was killed by signal 9 (Killed)"
  std::string describe() const;

  static ExitStatus from_wait_status(int status);  // as returned by waitpid
};

class SpawnError : public std::runtime_error {
 public:
  SpawnError(const std::string& what, int error_number, bool exec_failed)
      : std::runtime_error(what), errno_(error_number), exec_failed_(exec_failed) {}
  int error_number() const { return errno_; }
  // True if fork worked but exec did not (as opposed to pipe/fork failing).
  bool exec_failed() const { return exec_failed_; }
  // 127 when the program was not found, 126 when it could not be executed
  // (shell convention), 1 for resource failures before exec.
  int exit_code() const;

 private:
  int errno_;
  bool exec_failed_;
};

struct WorkerSpec {
  int rank = 0;
  std::vector<std::string> argv;  // argv[0] is looked up in PATH (execvp)
  std::vector<std::string> env;   // complete environment, "NAME=VALUE"
  // Empty: stdin is /dev/null. Otherwise stdin is a pipe holding these bytes
  // whose write end stays open until the worker is reaped, so the worker
  // sees EOF only when the launcher lets it go (a remote worker's ssh
  // carries its environment this way, ssh_command.h).
  std::string stdin_data;
};

struct WorkerPipes {
  UniqueFd stdout_read;
  UniqueFd stderr_read;
};

struct WorkerExit {
  int rank = 0;
  pid_t pid = -1;
  ExitStatus status;
};

class ProcessGroup {
 public:
  ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;
  ~ProcessGroup();

  // Starts one worker; throws SpawnError. Ranks need not be unique or
  // ordered; they are only carried through to WorkerExit.
  WorkerPipes spawn(const WorkerSpec& spec);

  // Workers whose exit was noticed since the previous call (non-blocking).
  std::vector<WorkerExit> poll_exits();

  // Sends `sig` to the process group of every worker that has not exited.
  // Returns how many groups were signalled.
  std::size_t signal_running(int sig);
  // Sends `sig` to the process group of the running worker with this rank
  // (id); returns false if none runs.
  bool signal_rank(int rank, int sig);
  // Same as signal_running, but also to groups of exited-but-unreaped workers, to reach any
  // processes they left behind.
  std::size_t signal_all_groups(int sig);

  std::size_t size() const { return workers_.size(); }
  std::size_t running_count() const;
  bool all_exited() const { return running_count() == 0; }
  pid_t pid_of(std::size_t index) const { return workers_.at(index).pid; }

  // Reaps every exited worker (their zombies go away, and with them the
  // guarantee that their group ids are not reused: signal stragglers first).
  // Workers still running are left alone; the destructor kills those.
  void reap_exited();

 private:
  struct Worker {
    int rank;
    pid_t pid;
    bool exited = false;
    bool reaped = false;
    UniqueFd stdin_write;  // spec.stdin_data's pipe; closed when reaped
  };
  std::vector<Worker> workers_;
};

}  // namespace khorovod::launcher
