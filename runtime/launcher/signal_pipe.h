// Signal pipe: turn asynchronous signals into readable bytes (self-pipe).
//
// The launcher's event loop is a single poll(2); signals must wake that poll
// rather than run logic in a handler. A SignalPipe installs a handler for the
// given signals that only write(2)s the signal number to a non-blocking pipe
// (async-signal-safe, errno preserved); the loop polls fd() and calls drain().
//
// The handler has to find the pipe through process-wide state, which is why
// this is the launcher's one global: the write end's descriptor. Therefore at
// most one SignalPipe may exist at a time (the constructor throws otherwise).
// The destructor restores the previous dispositions before closing the pipe.
//
// Thread-safety: construct, poll and drain from one thread. Signals may be
// delivered to any thread; the handler itself is safe everywhere.
#pragma once

#include <csignal>
#include <initializer_list>
#include <vector>

#include "launcher/unique_fd.h"

namespace khorovod::launcher {

class SignalPipe {
 public:
  explicit SignalPipe(std::initializer_list<int> signals);
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;
  ~SignalPipe();

  // Readable (POLLIN) whenever a signal arrived since the last drain().
  int fd() const { return read_.get(); }

  // Signal numbers received since the last call, in arrival order. Repeats
  // of the same signal may be coalesced if the pipe was full (64 KiB of
  // undrained signals), which is harmless for the launcher's uses.
  std::vector<int> drain();

 private:
  UniqueFd read_;
  UniqueFd write_;
  struct Saved {
    int sig;
    struct sigaction previous;
  };
  std::vector<Saved> saved_;
};

}  // namespace khorovod::launcher
