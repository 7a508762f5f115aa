// Job supervisor: run one job to completion: the launcher's event loop.
//
// Policy (horovodrun on one host):
//  * All workers are started up front. If one cannot be started (program
//    not found, ...), the ones already running are killed and run() returns
//    SpawnError::ExitCode() (127 for "not found").
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
//  * Elastic jobs (on_exit set) first offer every exit to on_exit, which
//    may start and stop workers through JobControl; when it returns true
//    the exit is handled and the job goes on. on_tick (if set) runs every
//    tick_interval with the same control, for changes that do not come from
//    an exit (host discovery). A worker stopped through JobControl::stop()
//    gets SIGTERM, and SIGKILL if it still runs a grace period later.
//
// Thread-safety: none needed; everything happens in run() on the calling thread, woken
// by poll(2) on the worker pipes and the SignalPipe (which must be watching
// SIGCHLD as well as the signals to forward).
#pragma once

#include <poll.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/output_mux.h"
#include "launcher/process_group.h"
#include "launcher/rank_output_files.h"
#include "launcher/signal_pipe.h"

namespace khorovod::launcher {

// What an elastic policy may do to a running job (implemented by
// JobSupervisor; valid only during the on_exit / on_tick call).
class JobControl {
 public:
  virtual ~JobControl() = default;
  // Starts a worker (after the callback returns). A spawn failure fails the job.
  virtual void start(WorkerSpec spec) = 0;
  // SIGTERM to the running worker with this id, SIGKILL a grace period later.
  virtual void stop(int id) = 0;
  // Fails the job: `why` is printed, the other workers are terminated, and
  // the launcher exits with `exit_code` (unless the job had already failed).
  virtual void fail(const std::string& why, int exit_code) = 0;
  // One "khorovodrun: ..." line on the launcher's stderr.
  virtual void message(const std::string& line) = 0;
};

struct JobConfig {
  std::vector<WorkerSpec> workers;
  std::chrono::milliseconds grace_period{3000};
  // Elastic jobs: called for every worker exit, success or not, before the
  // default policy above. Returns true when it handled the exit (the job
  // goes on), false for the default.
  std::function<bool(const WorkerExit&, JobControl&)> on_exit;
  // Elastic jobs: called every tick_interval (> 0) while the job runs.
  std::function<void(JobControl&)> on_tick;
  std::chrono::milliseconds tick_interval{0};
  // Elastic jobs: while it returns true, the job does not end when no worker
  // is left (it waits for hosts to come back; on_tick decides how long).
  std::function<bool()> hold_open;
  // --output-filename: per worker id, files that also get its output
  // (rank_output_files.h); taken by the worker's start.
  std::map<int, RankOutputFiles> output_files;
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

  class Control;
  // One turn of run()'s loop, in order.
  Status StartWorker(const WorkerSpec& spec, ProcessGroup& group, OutputMux& mux);
  void SpawnRequested(ProcessGroup& group, OutputMux& mux);
  bool TickDue(Clock::time_point now, ProcessGroup& group);  // true: on_tick ran
  void EnforceKillDeadlines(Clock::time_point now, ProcessGroup& group);
  bool JobOver(Clock::time_point now, const ProcessGroup& group, const OutputMux& mux);
  // Polls signals and output; false when the loop must end (poll failed).
  bool WaitForEvents(ProcessGroup& group, OutputMux& mux, std::vector<pollfd>& fds);
  void HandleExit(const WorkerExit& exit, ProcessGroup& group);
  void FailJob(const std::string& why, int exit_code, ProcessGroup& group);
  void HandleSignal(int sig, ProcessGroup& group);
  void StartGracePeriod();
  int PollTimeoutMs() const;
  void message(const std::string& line) const;

  JobConfig config_;
  SignalPipe& signals_;
  // The exit code, fixed by the first failure or forwarded signal.
  std::optional<int> result_;
  // When set, workers still running at this time are SIGKILLed.
  std::optional<Clock::time_point> kill_deadline_;
  // Workers started through JobControl, spawned by run() after the callback.
  std::vector<WorkerSpec> to_spawn_;
  // Workers stopped through JobControl: id -> when to SIGKILL them.
  std::map<int, Clock::time_point> stop_deadlines_;
  // When on_tick runs next.
  std::optional<Clock::time_point> next_tick_;
  // When set (all workers exited), stop waiting for pipe EOF at this time.
  std::optional<Clock::time_point> drain_deadline_;
};

}  // namespace khorovod::launcher
