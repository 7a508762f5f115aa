// Process group: spawn, track, signal and reap the worker processes.
//
// Contract:
//  * Spawn() forks and execs one worker. The worker runs in its own process
//    group (pgid == its pid) so that signals reach everything it starts
//    (shell pipelines, data-loader subprocesses) and a terminal's Ctrl-C is
//    delivered once, by the launcher, instead of twice. Its stdin is
//    /dev/null, its stdout/stderr are fresh pipes whose read ends (O_CLOEXEC,
//    O_NONBLOCK) are returned to the caller (stdin: WorkerSpec::stdin_data). The worker also gets
//    PR_SET_PDEATHSIG=SIGKILL so it does not outlive a launcher that was
//    itself SIGKILLed.
//  * If exec fails (program not found, not executable) Spawn() reports it
//    synchronously in its Status: an O_CLOEXEC pipe carries the child's
//    errno back, so the caller never has to guess from an exit code.
//    kInvalidArgument: not found; kFailedPrecondition: not executable;
//    kUnavailable: the launcher's own resources (pipe, fork) ran out.
//  * PollExits() notices exits with waitid(WNOWAIT): an exited worker stays
//    a zombie until ReapExited()/the destructor. Keeping the zombie reserves
//    its pid and therefore its process-group id, which is what makes it safe
//    to signal the group later (to clean up stragglers the worker left
//    behind) without ever hitting an unrelated process that reused the pid.
//  * The destructor SIGKILLs every worker group not yet reaped and reaps
//    them, so no exit path leaves orphans or zombies.
//
// Thread-safety: none. One thread owns a ProcessGroup and makes all calls.
// Spawn() only uses async-signal-safe calls between fork and exec, so it is
// also correct in a multi-threaded process, but concurrent calls are not.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "khorovod/status.h"
#include "launcher/unique_fd.h"

namespace khorovod::launcher {

// How a worker ended.
struct ExitStatus {
  bool signaled = false;  // false: exited normally
  int code = 0;           // exit code, or the signal number when `signaled`

  bool Success() const { return !signaled && code == 0; }
  // Shell convention: the exit code, or 128 + signal number.
  int ShellCode() const { return signaled ? 128 + code : code; }
  // "exited with code 3" / "was killed by signal 9 (Killed)"
  std::string Describe() const;

  static ExitStatus FromWaitStatus(int status);  // as returned by waitpid
};

// The shell's exit code for a failed Spawn(): 127 when the program was not
// found, 126 when it could not be executed, 1 for the launcher's resources.
int SpawnFailureExitCode(const Status& failure);

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

  // Starts one worker. Ranks need not be unique or ordered; they are only
  // carried through to WorkerExit.
  StatusOr<WorkerPipes> Spawn(const WorkerSpec& spec);

  // Workers whose exit was noticed since the previous call (non-blocking).
  std::vector<WorkerExit> PollExits();

  // Sends `sig` to the process group of every worker that has not exited.
  // Returns how many groups were signalled.
  std::size_t SignalRunning(int sig);
  // Sends `sig` to the process group of the running worker with this rank
  // (id); returns false if none runs.
  bool SignalRank(int rank, int sig);
  // Same as signal_running, but also to groups of exited-but-unreaped workers, to reach any
  // processes they left behind.
  std::size_t SignalAllGroups(int sig);

  std::size_t size() const { return workers_.size(); }
  std::size_t RunningCount() const;
  bool AllExited() const { return RunningCount() == 0; }
  pid_t PidOf(std::size_t index) const { return workers_.at(index).pid; }

  // Reaps every exited worker (their zombies go away, and with them the
  // guarantee that their group ids are not reused: signal stragglers first).
  // Workers still running are left alone; the destructor kills those.
  void ReapExited();

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
