// Waiter signals: how the background thread and a user thread blocked on an
// operation wake each other.
//
// Two directions:
// - caller -> background thread: a WaiterCount registers a thread that is
//   (about to be) blocked on a result. A blocked thread submits nothing more,
//   so the background thread stops gathering a burst of submissions and runs
//   the round at once. A blocking collective registers itself *before* it
//   queues its request, so the background thread sees it on its first look.
// - background thread -> caller (and the background thread's own wait for
//   work): spin briefly, then sleep on a condition variable or futex. Waking
//   a sleeping thread costs tens of microseconds to milliseconds on a
//   virtual machine, far more than a small collective, so a short spin pays
//   off, but only while every rank on the host has a core of its own: on an
//   oversubscribed host the spinning thread steals the core the peer rank
//   (or this rank's other thread) needs to make the progress it waits for.
//   SpinPolicy decides, from KHOROVOD_SPIN_WAITS (Config::spin_waits), the
//   cores this process may run on (sched_getaffinity) and the number of
//   ranks on this host.
//
// Thread-safety: SpinPolicy is a value type; WaiterCount is an RAII guard
// over an atomic counter (safe from any thread); SpinUntil is reentrant.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

#include "khorovod/config.h"

namespace khorovod {

// Cores this process may run on (its sched_getaffinity mask); at least 1.
int AllowedCores();

class SpinPolicy {
 public:
  // No spinning: every wait sleeps at once.
  SpinPolicy() = default;
  // kOn / kOff as given; kAuto spins when allowed_cores >= local_size.
  static SpinPolicy Resolve(SpinWaits setting, int local_size, int allowed_cores);
  // Resolve() with this process's config and allowed cores.
  static SpinPolicy ForConfig(const Config& config);

  bool enabled() const { return spin_; }
  // `wanted` when spinning is enabled, else zero.
  std::chrono::microseconds Budget(std::chrono::microseconds wanted) const {
    return spin_ ? wanted : std::chrono::microseconds(0);
  }

 private:
  explicit SpinPolicy(bool spin) : spin_(spin) {}
  bool spin_ = false;
};

// Polls `done` (yielding the core between polls) until it returns true or
// `budget` has passed; returns its last value. A zero budget polls once.
template <class Done>
bool SpinUntil(Done&& done, std::chrono::microseconds budget) {
  if (done()) return true;
  if (budget.count() <= 0) return false;
  const auto until = std::chrono::steady_clock::now() + budget;
  while (std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
    if (done()) return true;
  }
  return false;
}

// Counts the calling thread in `*count` for the guard's lifetime (a null
// count: nothing). The background thread reads the count (TensorQueue::
// waiters) to end a burst early.
class WaiterCount {
 public:
  explicit WaiterCount(std::atomic<int>* count) : count_(count) {
    if (count_) count_->fetch_add(1, std::memory_order_acq_rel);
  }
  ~WaiterCount() {
    if (count_) count_->fetch_sub(1, std::memory_order_acq_rel);
  }
  WaiterCount(const WaiterCount&) = delete;
  WaiterCount& operator=(const WaiterCount&) = delete;

 private:
  std::atomic<int>* count_;
};

}  // namespace khorovod
