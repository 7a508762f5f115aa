#include "launcher/signal_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace khorovod::launcher {
namespace {

// The only process-wide mutable state in the launcher: the handler cannot
// be given a context pointer, so it finds the pipe here. Lock-free atomic
// int accesses are async-signal-safe.
std::atomic<int> g_signal_write_fd{-1};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_signal(int sig) {
  const int saved_errno = errno;  // write(2) may clobber errno of the interrupted code
  const int fd = g_signal_write_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const unsigned char byte = static_cast<unsigned char>(sig);
    [[maybe_unused]] const ssize_t n = ::write(fd, &byte, 1);  // EAGAIN: pipe full, drop
  }
  errno = saved_errno;
}

}  // namespace

SignalPipe::SignalPipe(std::initializer_list<int> signals) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::runtime_error(std::string("cannot create signal pipe: ") + std::strerror(errno));
  }
  read_.reset(fds[0]);
  write_.reset(fds[1]);
  int expected = -1;
  if (!g_signal_write_fd.compare_exchange_strong(expected, write_.get())) {
    throw std::logic_error("only one SignalPipe may exist at a time");
  }
  struct sigaction action {};
  action.sa_handler = on_signal;
  ::sigemptyset(&action.sa_mask);
  // SA_RESTART keeps blocking reads/writes elsewhere from failing with
  // EINTR; poll(2) still returns early, which is what wakes the loop.
  // SA_NOCLDSTOP: only exits matter, not stop/continue of workers.
  action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  for (int sig : signals) {
    Saved saved{sig, {}};
    if (::sigaction(sig, &action, &saved.previous) == 0) saved_.push_back(saved);
  }
}

SignalPipe::~SignalPipe() {
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
    ::sigaction(it->sig, &it->previous, nullptr);
  }
  // Handlers are gone, so nothing can write to the pipe any more.
  int mine = write_.get();
  g_signal_write_fd.compare_exchange_strong(mine, -1);
}

std::vector<int> SignalPipe::drain() {
  std::vector<int> signals;
  unsigned char buf[64];
  for (;;) {
    const ssize_t n = ::read(read_.get(), buf, sizeof buf);
    if (n > 0) {
      signals.insert(signals.end(), buf, buf + n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // EAGAIN: empty; 0 cannot happen while write_ is open
  }
  return signals;
}

}  // namespace khorovod::launcher
