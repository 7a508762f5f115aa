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

JobSupervisor::JobSupervisor(JobConfig config, SignalPipe& signals)
    : config_(std::move(config)), signals_(signals) {}

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
  if (exit.status.success() || result_) return;
  if (config_.replace_failed) {
    if (auto spec = config_.replace_failed(exit)) {
      message("worker " + std::to_string(exit.rank) + " (pid " + std::to_string(exit.pid) + ") " +
              exit.status.describe() + "; starting worker " + std::to_string(spec->rank) +
              " in its place");
      to_spawn_.push_back(std::move(*spec));
      return;
    }
  }
  result_ = exit.status.shell_code();
  const std::size_t others = group.signal_running(SIGTERM);
  std::string line = "rank " + std::to_string(exit.rank) + " (pid " + std::to_string(exit.pid) +
                     ") " + exit.status.describe();
  if (others > 0) line += "; terminating the other " + workers_text(others);
  message(line);
  start_grace_period();
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
  for (const auto& d : {kill_deadline_, drain_deadline_}) {
    if (d && (!next || *d < *next)) next = d;
  }
  if (!next) return -1;  // nothing timed: sleep until a pipe or signal wakes us
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, INT_MAX));
}

int JobSupervisor::run() {
  // Destruction order matters: `mux` (declared last) closes the read ends
  // first, then `group` kills and reaps whatever is left.
  ProcessGroup group;
  OutputMux mux;
  auto start = [&](const WorkerSpec& spec) {
    WorkerPipes pipes = group.spawn(spec);
    mux.add_stream(std::move(pipes.stdout_read), LinePrefixer::stdout_prefix(spec.rank),
                   config_.stdout_fd);
    mux.add_stream(std::move(pipes.stderr_read), LinePrefixer::stderr_prefix(spec.rank),
                   config_.stderr_fd);
  };
  try {
    for (const auto& spec : config_.workers) start(spec);
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
    for (const WorkerSpec& spec : to_spawn_) {
      try {
        if (!result_) start(spec);
      } catch (const SpawnError& e) {
        message(e.what());
        result_ = e.exit_code();
        group.signal_running(SIGTERM);
        start_grace_period();
      }
    }
    to_spawn_.clear();

    const auto now = Clock::now();
    if (kill_deadline_ && now >= *kill_deadline_) {
      kill_deadline_.reset();
      if (!group.all_exited()) {
        message(workers_text(group.running_count()) + " still running after the " +
                std::to_string(config_.grace_period.count()) + " ms grace period; sending SIGKILL");
        group.signal_all_groups(SIGKILL);
      }
    }
    if (group.all_exited()) {
      if (!mux.has_open_streams()) break;
      if (!drain_deadline_) {
        drain_deadline_ = now + std::max(config_.grace_period, kMinDrainWindow);
      } else if (now >= *drain_deadline_) {
        message(
            "all workers exited but processes they started still hold their output open;"
            " killing them");
        break;
      }
    }

    fds.clear();
    fds.push_back(pollfd{signals_.fd(), POLLIN, 0});
    mux.append_pollfds(fds);
    const int ready = ::poll(fds.data(), fds.size(), poll_timeout_ms());
    if (ready < 0) {
      if (errno == EINTR) continue;
      message(std::string("poll failed: ") + std::strerror(errno));
      result_ = result_.value_or(1);
      break;  // the ProcessGroup destructor kills and reaps the workers
    }
    if (fds[0].revents != 0) {
      for (int sig : signals_.drain()) handle_signal(sig, group);
    }
    mux.service(fds);
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
