// InterruptibleWaits: ends, from another thread, the waits of one Gloo
// context's unbound buffers.
//
// Why: when a TCP pair fails, Gloo (0.0~git20220518) fails the unbound-buffer
// operations it still holds as pending, but not a send whose bytes are
// already queued for writing: a waitSend on it lasts until the context's
// timeout (30 s by default). A survivor stuck there never goes back to the
// rendezvous, and the others wait for it. The context (bootstrap/gloo_mesh)
// implements this interface; the collectives written on unbound buffers
// register their buffers with a WaitScope, and Interrupt() aborts every wait
// registered now or later (Gloo's abortWaitSend/abortWaitRecv), so those
// waits return at once and the collective fails with UNAVAILABLE. It lives
// with the context that implements it, below the backends that use it.
//
// Thread-safety: Interrupt() and interrupted() from any thread; a WaitScope
// is used by the thread that waits.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <set>
#include <vector>

#include "khorovod/util/mutex.h"

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}
}  // namespace gloo

namespace khorovod {

class InterruptibleWaits {
 public:
  virtual ~InterruptibleWaits() = default;

  // Aborts every registered wait, and makes every later registration fail;
  // then runs the OnInterrupt callbacks (outside the lock).
  void Interrupt();
  bool interrupted() const { return interrupted_.load(std::memory_order_acquire); }
  // Runs `fn` once when this context is interrupted, at once if it already
  // was: contexts connected through this one (backend/gloo/rank_subset_context.h)
  // are abandoned with it, so no wait on them outlasts the generation.
  void OnInterrupt(std::function<void()> fn);

 private:
  friend class WaitScope;
  // False when already interrupted (the caller must not wait).
  bool Register(gloo::transport::UnboundBuffer* buffer);
  void Unregister(gloo::transport::UnboundBuffer* buffer);

  Mutex mu_;
  std::set<gloo::transport::UnboundBuffer*> buffers_ GUARDED_BY(mu_);
  std::vector<std::function<void()>> on_interrupt_ GUARDED_BY(mu_);
  std::atomic<bool> interrupted_{false};
};

// Registers buffers with the context's InterruptibleWaits, if it has one,
// for the scope's lifetime. Check() throws (like a Gloo failure) once the
// context was interrupted: call it once the buffers are added (a buffer added
// after the interruption is not registered) and after every wait that
// returned false.
class WaitScope {
 public:
  WaitScope(gloo::Context& context, std::initializer_list<gloo::transport::UnboundBuffer*> buffers);
  ~WaitScope();
  WaitScope(const WaitScope&) = delete;
  WaitScope& operator=(const WaitScope&) = delete;

  void Add(gloo::transport::UnboundBuffer* buffer);
  // The buffer's waits; throw if the wait was interrupted (or aborted).
  void WaitRecv(gloo::transport::UnboundBuffer& buffer, std::chrono::milliseconds timeout) const;
  void WaitSend(gloo::transport::UnboundBuffer& buffer, std::chrono::milliseconds timeout) const;
  // Throws std::runtime_error if the waits were interrupted.
  void Check() const;

 private:
  InterruptibleWaits* waits_;
  std::set<gloo::transport::UnboundBuffer*> mine_;
};

}  // namespace khorovod
