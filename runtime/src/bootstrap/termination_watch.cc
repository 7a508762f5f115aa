#include "bootstrap/termination_watch.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <thread>

namespace khorovod {
namespace {

// The write end of the watch's pipe, or -1. A signal handler can reach
// nothing but process-wide state, so this one descriptor is global.
std::atomic<int> g_wake_fd{-1};

constexpr char kTerm = 'T';
constexpr char kStop = 'S';

extern "C" void OnSigterm(int) {
  const int saved = errno;
  const int fd = g_wake_fd.load();
  if (fd >= 0) (void)!write(fd, &kTerm, 1);
  errno = saved;
}

// Ends the process as an unhandled SIGTERM would.
[[noreturn]] void TerminateAsSigterm() {
  std::signal(SIGTERM, SIG_DFL);
  std::raise(SIGTERM);
  // Still alive: PID 1 of a namespace ignores default-disposition signals.
  _exit(128 + SIGTERM);
}

}  // namespace

void TerminationWatch::EndAsSigterm() { TerminateAsSigterm(); }

struct TerminationWatch::State {
  int read_fd = -1;
  int write_fd = -1;
  std::thread thread;
};

std::unique_ptr<TerminationWatch> TerminationWatch::Install(std::function<void()> on_term) {
  struct sigaction current {};
  if (sigaction(SIGTERM, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return nullptr;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return nullptr;
  int expected = -1;
  if (!g_wake_fd.compare_exchange_strong(expected, fds[1])) {
    close(fds[0]);
    close(fds[1]);
    return nullptr;
  }
  auto state = std::make_unique<State>();
  state->read_fd = fds[0];
  state->write_fd = fds[1];
  state->thread = std::thread([fd = fds[0], on_term = std::move(on_term)] {
    char c = 0;
    for (;;) {
      const ssize_t n = read(fd, &c, 1);
      if (n == 1) break;
      if (n < 0 && errno == EINTR) continue;
      return;  // pipe closed
    }
    if (c != kTerm) return;
    if (on_term) on_term();
    TerminateAsSigterm();
  });
  struct sigaction handler {};
  handler.sa_handler = OnSigterm;
  sigemptyset(&handler.sa_mask);
  handler.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &handler, nullptr);
  return std::unique_ptr<TerminationWatch>(new TerminationWatch(std::move(state)));
}

TerminationWatch::TerminationWatch(std::unique_ptr<State> state) : state_(std::move(state)) {}

TerminationWatch::~TerminationWatch() {
  std::signal(SIGTERM, SIG_DFL);
  g_wake_fd.store(-1);
  (void)!write(state_->write_fd, &kStop, 1);
  state_->thread.join();
  close(state_->read_fd);
  close(state_->write_fd);
}

}  // namespace khorovod
