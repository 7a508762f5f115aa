#include "job_supervisor.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>

#include "output_mux.h"

namespace khorovod::launcher {
namespace {

std::string signal_name(int sig) {
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

std::string workers_text(std::size_t n) {
  return std::to_string(n) + (n == 1 ? " worker" : " workers");
}

}  // namespace

class JobSupervisor::Control : public JobControl {
 public:
  Control(JobSupervisor& supervisor, ProcessGroup& group) : s_(supervisor), group_(group) {}
  void start(WorkerSpec spec) override { s_.to_spawn_.push_back(std::move(spec)); }
  void stop(int id) override {
    if (group_.signal_rank(id, SIGTERM)) {
      s_.stop_deadlines_.emplace(id, Clock::now() + s_.config_.grace_period);
    }
  }
  void fail(const std::string& why, int exit_code) override { s_.fail_job(why, exit_code, group_); }
  void message(const std::string& line) override { s_.message(line); }

 private:
  JobSupervisor& s_;
  ProcessGroup& group_;
};

JobSupervisor::JobSupervisor(JobConfig config, SignalPipe& signals)
    : config_(std::move(config)), signals_(signals) {}

void JobSupervisor::fail_job(const std::string& why, int exit_code, ProcessGroup& group) {
  if (result_) return;
  result_ = exit_code;
  const std::size_t others = group.signal_running(SIGTERM);
  std::string line = why;
  if (others > 0) line += "; terminating the other " + workers_text(others);
  message(line);
  start_grace_period();
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

void JobSupervisor::start_grace_period() {
  if (!kill_deadline_) kill_deadline_ = Clock::now() + config_.grace_period;
}

void JobSupervisor::handle_exit(const WorkerExit& exit, ProcessGroup& group) {
  // Exits after the job already failed or was interrupted are the expected
  // fallout of our own SIGTERM; only the first failure is reported.
  stop_deadlines_.erase(exit.rank);
  if (result_) return;
  if (config_.on_exit) {
    Control control(*this, group);
    if (config_.on_exit(exit, control)) return;
  }
  if (exit.status.success() || result_) return;
  fail_job("rank " + std::to_string(exit.rank) + " (pid " + std::to_string(exit.pid) + ") " +
               exit.status.describe(),
           exit.status.shell_code(), group);
}

void JobSupervisor::handle_signal(int sig, ProcessGroup& group) {
  if (sig != SIGINT && sig != SIGTERM) return;  // SIGCHLD only wakes the loop
  const std::size_t n = group.signal_running(sig);
  message("received " + signal_name(sig) + "; forwarded it to " + workers_text(n));
  if (!result_) result_ = 128 + sig;
  start_grace_period();
}

int JobSupervisor::poll_timeout_ms() const {
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

void JobSupervisor::start_worker(const WorkerSpec& spec, ProcessGroup& group, OutputMux& mux) {
  WorkerPipes pipes = group.spawn(spec);
  RankOutputFiles files;
  if (auto it = config_.output_files.find(spec.rank); it != config_.output_files.end()) {
    files = std::move(it->second);
    config_.output_files.erase(it);
  }
  mux.add_stream(std::move(pipes.stdout_read), LinePrefixer::stdout_prefix(spec.rank), config_.stdout_fd,
                 std::move(files.stdout_file));
  mux.add_stream(std::move(pipes.stderr_read), LinePrefixer::stderr_prefix(spec.rank), config_.stderr_fd,
                 std::move(files.stderr_file));
}

void JobSupervisor::spawn_requested(ProcessGroup& group, OutputMux& mux) {
  for (const WorkerSpec& spec : to_spawn_) {
    try {
      if (!result_) start_worker(spec, group, mux);
    } catch (const SpawnError& e) {
      message(e.what());
      result_ = e.exit_code();
      group.signal_running(SIGTERM);
      start_grace_period();
    }
  }
  to_spawn_.clear();
}

bool JobSupervisor::tick_due(Clock::time_point now, ProcessGroup& group) {
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

void JobSupervisor::enforce_kill_deadlines(Clock::time_point now, ProcessGroup& group) {
  for (auto it = stop_deadlines_.begin(); it != stop_deadlines_.end();) {
    if (now < it->second) {
      ++it;
      continue;
    }
    message("worker " + std::to_string(it->first) + " still running " +
            std::to_string(config_.grace_period.count()) + " ms after SIGTERM; sending SIGKILL");
    group.signal_rank(it->first, SIGKILL);
    it = stop_deadlines_.erase(it);
  }
  if (kill_deadline_ && now >= *kill_deadline_) {
    kill_deadline_.reset();
    if (!group.all_exited()) {
      message(workers_text(group.running_count()) + " still running after the " +
              std::to_string(config_.grace_period.count()) + " ms grace period; sending SIGKILL");
      group.signal_all_groups(SIGKILL);
    }
  }
}

bool JobSupervisor::job_over(Clock::time_point now, const ProcessGroup& group, const OutputMux& mux) {
  const bool held = !result_ && config_.hold_open && config_.hold_open();
  if (!group.all_exited() || held) return false;
  if (!mux.has_open_streams()) return true;
  if (!drain_deadline_) {
    drain_deadline_ = now + std::max(config_.grace_period, kMinDrainWindow);
    return false;
  }
  if (now < *drain_deadline_) return false;
  message("all workers exited but processes they started still hold their output open; killing them");
  return true;
}

bool JobSupervisor::wait_for_events(ProcessGroup& group, OutputMux& mux, std::vector<pollfd>& fds) {
  fds.clear();
  fds.push_back(pollfd{signals_.fd(), POLLIN, 0});
  mux.append_pollfds(fds);
  const int ready = ::poll(fds.data(), fds.size(), poll_timeout_ms());
  if (ready < 0) {
    if (errno == EINTR) return true;
    message(std::string("poll failed: ") + std::strerror(errno));
    result_ = result_.value_or(1);
    return false;  // the ProcessGroup destructor kills and reaps the workers
  }
  if (fds[0].revents != 0) {
    for (int sig : signals_.drain()) handle_signal(sig, group);
  }
  mux.service(fds);
  return true;
}

int JobSupervisor::run() {
  // Destruction order matters: `mux` (declared last) closes the read ends
  // first, then `group` kills and reaps whatever is left.
  ProcessGroup group;
  OutputMux mux;
  try {
    for (const auto& spec : config_.workers) start_worker(spec, group, mux);
  } catch (const SpawnError& e) {
    // Workers already started cannot form a complete job; stop them now.
    message(e.what());
    group.signal_running(SIGKILL);
    mux.drain_and_close_all();
    return e.exit_code();
  }

  std::vector<pollfd> fds;
  for (;;) {
    for (const auto& exit : group.poll_exits()) handle_exit(exit, group);
    spawn_requested(group, mux);
    if (tick_due(Clock::now(), group)) continue;  // start what on_tick asked for before sleeping
    const auto now = Clock::now();
    enforce_kill_deadlines(now, group);
    if (job_over(now, group, mux)) break;
    if (!wait_for_events(group, mux, fds)) break;
  }

  // The job is over: nothing in the workers' process groups may outlive it
  // (the unreaped zombies keep those group ids from being reused, so this
  // cannot hit unrelated processes).
  group.signal_all_groups(SIGKILL);
  mux.drain_and_close_all();
  group.reap_exited();
  return result_.value_or(0);
}

}  // namespace khorovod::launcher
