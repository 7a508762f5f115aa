// StopSignals: how a server's main waits for SIGINT/SIGTERM.
//
// The constructor blocks SIGINT and SIGTERM in the calling thread (every
// thread started after it inherits the mask) and ignores SIGPIPE, so that
// only Wait() sees the stop signals and a closed socket never kills the
// process. Construct it in main before starting any thread.
//
// Thread-safety: Wait() may be called from any one thread.
#pragma once

#include <csignal>

namespace khorovod {

class StopSignals {
 public:
  StopSignals();
  // Blocks until SIGINT or SIGTERM arrives; returns its number.
  int Wait() const;

 private:
  sigset_t set_;
};

}  // namespace khorovod
