// TerminationWatch: turns SIGTERM into an announced departure.
//
// Kubernetes stops a pod (scale-down, eviction, deletion) with SIGTERM and a
// grace period. A trainer that is its container's PID 1 ignores SIGTERM
// unless it has a handler, so without one a scaled-down worker keeps
// training for the whole grace period (30 s by default) and its peers learn
// of its departure only after SIGKILL and a missed heartbeat. With one, the
// worker tells the rendezvous it is leaving and ends at once, so the
// survivors re-form within a round trip.
//
// While a watch lives, and only if SIGTERM had its default disposition when
// it was installed (a program's own handler always wins), SIGTERM runs
// `on_term` on the watch's own thread and then ends the process the way
// SIGTERM would have: by the signal itself, or with exit status 143 where the
// signal cannot kill (PID 1). `on_term` may block to defer that end (the
// elastic rendezvous waits, bounded, for the training's next commit) and
// another thread may end the process first (EndAsSigterm).
//
// Thread-safety: Install and destruction from one thread. At most one watch
// exists per process (signal dispositions are process-wide); a second
// Install returns nullptr.
#pragma once

#include <functional>
#include <memory>

namespace khorovod {

class TerminationWatch {
 public:
  // nullptr when SIGTERM already has a handler, or a watch exists.
  static std::unique_ptr<TerminationWatch> Install(std::function<void()> on_term);
  // Restores SIGTERM's default disposition and stops the watch thread.
  ~TerminationWatch();
  // Ends the process the way SIGTERM would (the signal, or status 143 where
  // it cannot kill): for a SIGTERM whose effect was deferred.
  [[noreturn]] static void EndAsSigterm();
  TerminationWatch(const TerminationWatch&) = delete;
  TerminationWatch& operator=(const TerminationWatch&) = delete;

 private:
  struct State;
  explicit TerminationWatch(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace khorovod
