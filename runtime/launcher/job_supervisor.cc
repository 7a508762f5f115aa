#include "launcher/job_supervisor.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>

#include "launcher/output_mux.h"

namespace khorovod::launcher {
namespace {

std::string SignalName(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "signal " + std::to_string(sig);
  }
}

// How long to keep reading after every worker exited, at least. Pipes
// normally hit EOF right away; this only matters when something the workers
// started holds them open, and keeps --grace-period-ms 0 from cutting off
// output that is merely still in flight.
constexpr std::chrono::milliseconds kMinDrainWindow{500};

std::string WorkersText(std::size_t n) {
  return std::to_string(n) + (n == 1 ? " worker" : " workers");
}

}  // namespace

class JobSupervisor::Control : public JobControl {
 public:
  Control(JobSupervisor& supervisor, ProcessGroup& group) : s_(supervisor), group_(group) {}
  void start(WorkerSpec spec) override { s_.to_spawn_.push_back(std::move(spec)); }
  void stop(int id) override {
    if (group_.SignalRank(id, SIGTERM)) {
      s_.stop_deadlines_.emplace(id, Clock::now() + s_.config_.grace_period);
    }
  }
  void fail(const std::string& why, int exit_code) override { s_.FailJob(why, exit_code, group_); }
  void message(const std::string& line) override { s_.message(line); }

 private:
  JobSupervisor& s_;
  ProcessGroup& group_;
};

JobSupervisor::JobSupervisor(JobConfig config, SignalPipe& signals)
    : config_(std::move(config)), signals_(signals) {}

void JobSupervisor::FailJob(const std::string& why, int exit_code, ProcessGroup& group) {
  if (result_) return;
  result_ = exit_code;
  const std::size_t others = group.SignalRunning(SIGTERM);
  std::string line = why;
  if (others > 0) line += "; terminating the other " + WorkersText(others);
  message(line);
  StartGracePeriod();
}

void JobSupervisor::message(const std::string& line) const {
  // One write per message so it cannot be split by worker output; all
  // writes happen on this thread anyway.
  const std::string text = "khorovodrun: " + line + "\n";
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(config_.stderr_fd, text.data() + done, text.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (!(n < 0 && errno == EINTR)) {
      return;  // stderr is gone; nothing better to do
    }
  }
}

void JobSupervisor::StartGracePeriod() {
  if (!kill_deadline_) kill_deadline_ = Clock::now() + config_.grace_period;
}

void JobSupervisor::HandleExit(const WorkerExit& exit, ProcessGroup& group) {
  // Exits after the job already failed or was interrupted are the expected
  // fallout of our own SIGTERM; only the first failure is reported.
  stop_deadlines_.erase(exit.rank);
  if (result_) return;
  if (config_.on_exit) {
    Control control(*this, group);
    if (config_.on_exit(exit, control)) return;
  }
  if (exit.status.Success() || result_) return;
  FailJob("rank " + std::to_string(exit.rank) + " (pid " + std::to_string(exit.pid) + ") " +
              exit.status.Describe(),
          exit.status.ShellCode(), group);
}

void JobSupervisor::HandleSignal(int sig, ProcessGroup& group) {
  if (sig != SIGINT && sig != SIGTERM) return;  // SIGCHLD only wakes the loop
  const std::size_t n = group.SignalRunning(sig);
  message("received " + SignalName(sig) + "; forwarded it to " + WorkersText(n));
  if (!result_) result_ = 128 + sig;
  StartGracePeriod();
}

int JobSupervisor::PollTimeoutMs() const {
  std::optional<Clock::time_point> next;
  for (const auto& d : {kill_deadline_, drain_deadline_, next_tick_}) {
    if (d && (!next || *d < *next)) next = d;
  }
  for (const auto& [id, when] : stop_deadlines_) {
    if (!next || when < *next) next = when;
  }
  if (!next) return -1;  // nothing timed: sleep until a pipe or signal wakes us
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, INT_MAX));
}

Status JobSupervisor::StartWorker(const WorkerSpec& spec, ProcessGroup& group, OutputMux& mux) {
  StatusOr<WorkerPipes> spawned = group.Spawn(spec);
  if (!spawned.ok()) return spawned.status();
  WorkerPipes pipes = std::move(*spawned);
  RankOutputFiles files;
  if (auto it = config_.output_files.find(spec.rank); it != config_.output_files.end()) {
    files = std::move(it->second);
    config_.output_files.erase(it);
  }
  mux.AddStream(std::move(pipes.stdout_read), LinePrefixer::StdoutPrefix(spec.rank),
                config_.stdout_fd, std::move(files.stdout_file));
  mux.AddStream(std::move(pipes.stderr_read), LinePrefixer::StderrPrefix(spec.rank),
                config_.stderr_fd, std::move(files.stderr_file));
  return Status::Ok();
}

void JobSupervisor::SpawnRequested(ProcessGroup& group, OutputMux& mux) {
  for (const WorkerSpec& spec : to_spawn_) {
    if (result_) break;
    if (Status started = StartWorker(spec, group, mux); !started.ok()) {
      message(started.message());
      result_ = SpawnFailureExitCode(started);
      group.SignalRunning(SIGTERM);
      StartGracePeriod();
    }
  }
  to_spawn_.clear();
}

bool JobSupervisor::TickDue(Clock::time_point now, ProcessGroup& group) {
  if (!config_.on_tick || config_.tick_interval.count() <= 0 || result_) {
    next_tick_.reset();
    return false;
  }
  if (!next_tick_) next_tick_ = now + config_.tick_interval;
  if (now < *next_tick_) return false;
  Control control(*this, group);
  config_.on_tick(control);
  next_tick_ = Clock::now() + config_.tick_interval;
  return true;
}

void JobSupervisor::EnforceKillDeadlines(Clock::time_point now, ProcessGroup& group) {
  for (auto it = stop_deadlines_.begin(); it != stop_deadlines_.end();) {
    if (now < it->second) {
      ++it;
      continue;
    }
    message("worker " + std::to_string(it->first) + " still running " +
            std::to_string(config_.grace_period.count()) + " ms after SIGTERM; sending SIGKILL");
    group.SignalRank(it->first, SIGKILL);
    it = stop_deadlines_.erase(it);
  }
  if (kill_deadline_ && now >= *kill_deadline_) {
    kill_deadline_.reset();
    if (!group.AllExited()) {
      message(WorkersText(group.RunningCount()) + " still running after the " +
              std::to_string(config_.grace_period.count()) + " ms grace period; sending SIGKILL");
      group.SignalAllGroups(SIGKILL);
    }
  }
}

bool JobSupervisor::JobOver(Clock::time_point now, const ProcessGroup& group,
                            const OutputMux& mux) {
  const bool held = !result_ && config_.hold_open && config_.hold_open();
  if (!group.AllExited() || held) return false;
  if (!mux.HasOpenStreams()) return true;
  if (!drain_deadline_) {
    drain_deadline_ = now + std::max(config_.grace_period, kMinDrainWindow);
    return false;
  }
  if (now < *drain_deadline_) return false;
  message(
      "all workers exited but processes they started still hold their output open; killing them");
  return true;
}

bool JobSupervisor::WaitForEvents(ProcessGroup& group, OutputMux& mux, std::vector<pollfd>& fds) {
  fds.clear();
  fds.push_back(pollfd{signals_.fd(), POLLIN, 0});
  mux.AppendPollfds(fds);
  const int ready = ::poll(fds.data(), fds.size(), PollTimeoutMs());
  if (ready < 0) {
    if (errno == EINTR) return true;
    message(std::string("poll failed: ") + std::strerror(errno));
    result_ = result_.value_or(1);
    return false;  // the ProcessGroup destructor kills and reaps the workers
  }
  if (fds[0].revents != 0) {
    for (int sig : signals_.drain()) HandleSignal(sig, group);
  }
  mux.service(fds);
  return true;
}

int JobSupervisor::run() {
  // Destruction order matters: `mux` (declared last) closes the read ends
  // first, then `group` kills and reaps whatever is left.
  ProcessGroup group;
  OutputMux mux;
  for (const auto& spec : config_.workers) {
    if (Status started = StartWorker(spec, group, mux); !started.ok()) {
      // Workers already started cannot form a complete job; stop them now.
      message(started.message());
      group.SignalRunning(SIGKILL);
      mux.DrainAndCloseAll();
      return SpawnFailureExitCode(started);
    }
  }

  std::vector<pollfd> fds;
  for (;;) {
    for (const auto& exit : group.PollExits()) HandleExit(exit, group);
    SpawnRequested(group, mux);
    if (TickDue(Clock::now(), group)) continue;  // start what on_tick asked for before sleeping
    const auto now = Clock::now();
    EnforceKillDeadlines(now, group);
    if (JobOver(now, group, mux)) break;
    if (!WaitForEvents(group, mux, fds)) break;
  }

  // The job is over: nothing in the workers' process groups may outlive it
  // (the unreaped zombies keep those group ids from being reused, so this
  // cannot hit unrelated processes).
  group.SignalAllGroups(SIGKILL);
  mux.DrainAndCloseAll();
  group.ReapExited();
  return result_.value_or(0);
}

}  // namespace khorovod::launcher
