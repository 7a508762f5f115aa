// job_supervisor.h - run one job to completion: the launcher's event loop.
//
// Policy (horovodrun on one host):
//  * All workers are started up front. If one cannot be started (program
//    not found, ...), the ones already running are killed and run() returns
//    SpawnError::exit_code() (127 for "not found").
//  * The first worker that exits non-zero or dies from a signal fails the
//    job: one line on stderr names the rank and how it ended, the other
//    workers get SIGTERM, and whatever still runs after the grace period gets
//    SIGKILL. run() returns that worker's exit code, or 128 + signal.
//  * SIGINT/SIGTERM received by the launcher are forwarded to every worker
//    (to each worker's process group) and start the same grace-period
//    countdown; run() then returns 128 + that signal unless a worker had
//    already failed the job.
//  * Once every worker has exited, output still in the pipes is drained. If
//    processes a worker left behind keep a pipe open, the launcher waits at
//    most one grace period for them. When the job ends, anything left in the
//    workers' process groups is killed, so nothing outlives khorovodrun.
//  * If every worker exits 0 (and no signal arrived), run() returns 0.
//  * Elastic jobs (replace_failed set) first offer each failure to
//    replace_failed; a replacement is started and the job goes on.
//
// Single-threaded: everything happens in run() on the calling thread, woken
// by poll(2) on the worker pipes and the SignalPipe (which must be watching
// SIGCHLD as well as the signals to forward).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "process_group.h"
#include "signal_pipe.h"

namespace khorovod::launcher {

struct JobConfig {
  std::vector<WorkerSpec> workers;
  std::chrono::milliseconds grace_period{3000};
  // Elastic jobs: called for each worker that failed. A returned spec is
  // started in its place and the job goes on; nullopt fails the job as
  // described above.
  std::function<std::optional<WorkerSpec>(const WorkerExit&)> replace_failed;
  // Where prefixed worker output and the launcher's own messages go.
  int stdout_fd = 1;
  int stderr_fd = 2;
};

class JobSupervisor {
 public:
  JobSupervisor(JobConfig config, SignalPipe& signals);

  // Runs the job; returns the launcher's exit code. Call once.
  int run();

 private:
  using Clock = std::chrono::steady_clock;

  void handle_exit(const WorkerExit& exit, ProcessGroup& group);
  void handle_signal(int sig, ProcessGroup& group);
  void start_grace_period();
  int poll_timeout_ms() const;
  void message(const std::string& line) const;

  JobConfig config_;
  SignalPipe& signals_;
  // The exit code, fixed by the first failure or forwarded signal.
  std::optional<int> result_;
  // When set, workers still running at this time are SIGKILLed.
  std::optional<Clock::time_point> kill_deadline_;
  // Replacements chosen by replace_failed, started by run().
  std::vector<WorkerSpec> to_spawn_;
  // When set (all workers exited), stop waiting for pipe EOF at this time.
  std::optional<Clock::time_point> drain_deadline_;
};

}  // namespace khorovod::launcher
