#include "cmd/stop_signals.h"

#include <pthread.h>

namespace khorovod::op {

StopSignals::StopSignals() {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGINT);
  sigaddset(&signals_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

int StopSignals::Wait() {
  int sig = 0;
  sigwait(&signals_, &sig);
  return sig;
}

}  // namespace khorovod::op
