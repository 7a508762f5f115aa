// Completion: the shared state behind a Handle.
//
// The background thread fills in results and calls Finish() once per part
// (a grouped allreduce has one part per tensor); the operation is done when
// every part finished. The first error wins. Waiters spin for the budget
// set with SetSpin (zero unless the runtime's SpinPolicy allows it; see
// common/waiter_signal.h), then block on a condition variable.
//
// Thread-safety: every method is safe to call concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "common/waiter_signal.h"
#include "khorovod/status.h"
#include "khorovod/tensor.h"
#include "khorovod/util/mutex.h"

namespace khorovod {

class Completion {
 public:
  explicit Completion(int parts = 1) : remaining_(parts) {}

  // Marks one part finished. Results set before the last Finish are visible
  // to waiters once they return.
  void Finish(const Status& status);
  void SetOutput(Tensor output, std::vector<int64_t> received_splits = {});
  void SetJoinLastRank(int rank);

  bool Ready() const;
  Status Wait() const;
  // Runs `callback` with the final status once the operation is done: at
  // once on the calling thread when it already is, else on the thread whose
  // Finish completes it (the background thread), outside the lock. Each
  // callback runs exactly once; it must not block.
  void OnDone(std::function<void(const Status&)> callback);
  Status WaitFor(std::chrono::milliseconds timeout) const;
  Tensor TakeOutput();
  std::vector<int64_t> ReceivedSplits() const;
  int JoinLastRank() const;

  // Time a Wait()/WaitFor() call spends blocked is added to `sink` (in
  // nanoseconds): the runtime's exposed-communication clock. Call before the
  // completion is shared with another thread.
  void SetWaitSink(std::shared_ptr<std::atomic<int64_t>> sink) { wait_sink_ = std::move(sink); }

  // While a Wait()/WaitFor() call blocks, it counts on `board` (see
  // TensorQueue::waiters). Call before the completion is shared.
  void SetWaiterBoard(std::shared_ptr<WaiterBoard> board) { waiters_ = std::move(board); }

  // How long Wait() spins before it sleeps [0]. Call before the completion
  // is shared.
  void SetSpin(std::chrono::microseconds budget) { spin_ = budget; }

  // A completion that is already done, for calls rejected before enqueueing.
  static std::shared_ptr<Completion> Failed(const Status& status);

 private:
  void AddBlocked(std::chrono::steady_clock::time_point since) const;

  mutable Mutex mu_;
  mutable std::condition_variable cv_;
  std::atomic<bool> done_{false};
  int remaining_ GUARDED_BY(mu_);
  Status status_ GUARDED_BY(mu_);
  Tensor output_ GUARDED_BY(mu_);
  std::vector<int64_t> received_splits_ GUARDED_BY(mu_);
  int join_last_rank_ GUARDED_BY(mu_) = -1;
  std::vector<std::function<void(const Status&)>> callbacks_ GUARDED_BY(mu_);
  std::shared_ptr<std::atomic<int64_t>> wait_sink_;
  std::shared_ptr<WaiterBoard> waiters_;
  std::chrono::microseconds spin_{0};
};

}  // namespace khorovod
