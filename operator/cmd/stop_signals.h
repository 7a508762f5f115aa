// StopSignals: SIGINT and SIGTERM delivered to one waiting thread only.
//
// Construct it in main before any thread starts: it blocks both signals in
// the calling thread, so every thread started later inherits the mask and
// only Wait() (sigwait) sees them. It also ignores SIGPIPE, so a peer that
// closes a connection surfaces as a write error, not a dead process.
//
// Thread-safety: construct once, early, in main; Wait() from one thread.
#pragma once

#include <signal.h>

namespace khorovod::op {

class StopSignals {
 public:
  StopSignals();
  // Blocks until SIGINT or SIGTERM arrives; returns the signal number.
  int Wait();

 private:
  sigset_t signals_;
};

}  // namespace khorovod::op
