// Waiter signals: how the background thread and a user thread blocked on an
// operation wake each other.
//
// Two directions:
// - caller -> background thread: a WaiterCount registers a thread that is
//   (about to be) blocked on a result on the session's WaiterBoard. A
//   blocked thread submits nothing more, so the background thread stops
//   gathering a burst of submissions and runs the round at once. A blocking
//   collective registers itself *before* it queues its request, so the
//   background thread sees it on its first look. The board also wakes a
//   background thread that sleeps while it gathers a small burst
//   (core/burst_rule.h), at the first blocked thread or submission.
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
// Thread-safety: SpinPolicy is a value type; WaiterBoard is safe from any
// thread; WaiterCount is an RAII guard over a board; SpinUntil is reentrant.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <thread>

#include "khorovod/config.h"
#include "khorovod/util/mutex.h"

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

// The user threads blocked on results of one session, and the background
// thread's wake-up: shared by the session's queue and the Completions it
// hands out, which may outlive it. Every Enter, NoteAwaited and Poke (a
// submission) counts as a change; WaitForChange sleeps until one happens.
class WaiterBoard {
 public:
  // Threads between Enter and Leave.
  int blocked() const { return blocked_.load(std::memory_order_acquire); }
  // Number of changes so far (Enter, NoteAwaited and Poke calls).
  uint64_t changes() const { return changes_.load(std::memory_order_acquire); }
  // Number of NoteAwaited calls so far.
  uint64_t awaited() const { return awaited_.load(std::memory_order_acquire); }
  void Enter();
  // An unfinished operation's result is awaited without a blocked thread:
  // a completion callback was registered (TensorFlow's kernels), or a poll
  // found it unfinished.
  void NoteAwaited();
  void Leave() { blocked_.fetch_sub(1, std::memory_order_acq_rel); }
  // Records a change other than a blocked thread and wakes the sleeper.
  void Poke();
  // Returns once changes() differs from `seen`, or at `deadline`.
  void WaitForChange(uint64_t seen, std::chrono::steady_clock::time_point deadline);

 private:
  std::atomic<int> blocked_{0};
  std::atomic<uint64_t> changes_{0};
  std::atomic<uint64_t> awaited_{0};
  Mutex mu_;  // orders a change against the sleeper's check of it
  std::condition_variable cv_;
};

// Counts the calling thread as blocked on `*board` for the guard's lifetime
// (a null board: nothing). The background thread reads the count
// (WaiterBoard::blocked) to end a burst early.
class WaiterCount {
 public:
  explicit WaiterCount(WaiterBoard* board) : board_(board) {
    if (board_) board_->Enter();
  }
  ~WaiterCount() {
    if (board_) board_->Leave();
  }
  WaiterCount(const WaiterCount&) = delete;
  WaiterCount& operator=(const WaiterCount&) = delete;

 private:
  WaiterBoard* board_;
};

}  // namespace khorovod
