// TensorQueue: the hand-off from user threads to the background thread.
//
// User threads Push operations; the background thread drains them with
// PopAll and, when an operation finishes, calls Complete, which first frees
// the name and then signals the Handle (so a caller that resubmits the same
// name right after wait() returns is never refused as a duplicate).
//
// Names in flight are tracked here, at submission time, so a duplicate is
// refused immediately on the submitting thread with kAlreadyExists.
//
// Thread-safety: all methods are safe to call concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/completion.h"
#include "core/message.h"
#include "khorovod/tensor.h"
#include "khorovod/util/mutex.h"

namespace khorovod {

struct PendingOp {
  Request request;
  TensorView input;   // the tensor sent (broadcast: the buffer, in place)
  TensorView output;  // allreduce only
  std::shared_ptr<Completion> completion;
  std::chrono::steady_clock::time_point submitted;
};

class TensorQueue {
 public:
  // Enqueues all ops or none: a duplicate name (within `ops` or in flight)
  // or a closed queue refuses the whole batch.
  Status Push(std::vector<PendingOp> ops);
  void PopAll(std::vector<PendingOp>* out);
  // Frees the op's name, then finishes one part of its completion.
  void Complete(const PendingOp& op, const Status& status);

  // Waits until work is queued, shutdown was requested, or `deadline`,
  // spinning for up to `spin` first (cheap when the next submission follows
  // the last completion closely, as in a training loop).
  void WaitForWork(std::chrono::steady_clock::time_point deadline,
                   std::chrono::microseconds spin = std::chrono::microseconds(0));
  // Number of Push calls that enqueued work so far; lets the background
  // thread see whether a burst of submissions is still arriving.
  uint64_t submissions() const { return submissions_.load(std::memory_order_acquire); }
  bool has_incoming() const { return has_incoming_.load(std::memory_order_acquire); }
  // Input bytes of the operations queued since the last PopAll.
  uint64_t incoming_bytes() const { return incoming_bytes_.load(std::memory_order_acquire); }
  // Whether a result was awaited (WaiterBoard::NoteAwaited) since the last
  // PopAll: then the queued operations are likely among those awaited.
  bool awaited_since_pop() const {
    return waiters_->awaited() != awaited_at_pop_.load(std::memory_order_acquire);
  }
  // The user threads blocked waiting on an operation. A thread that waits
  // submits nothing more, so the background thread stops gathering a burst
  // and starts the round at once. Every Push pokes it, so the background
  // thread can sleep on it while it gathers a burst. Shared with the
  // Completions (Completion::SetWaiterBoard), which may outlive the queue.
  const std::shared_ptr<WaiterBoard>& waiters() const { return waiters_; }
  void RequestShutdown();
  bool shutdown_requested() const;
  // Refuses every later Push with `reason`.
  void Close(const Status& reason);

 private:
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::vector<PendingOp> incoming_ GUARDED_BY(mu_);
  std::atomic<bool> has_incoming_{false};
  std::atomic<uint64_t> submissions_{0};
  std::atomic<uint64_t> incoming_bytes_{0};
  std::atomic<uint64_t> awaited_at_pop_{0};
  const std::shared_ptr<WaiterBoard> waiters_ = std::make_shared<WaiterBoard>();
  std::unordered_set<std::string> in_flight_ GUARDED_BY(mu_);
  bool shutdown_requested_ GUARDED_BY(mu_) = false;
  bool closed_ GUARDED_BY(mu_) = false;
  Status closed_reason_ GUARDED_BY(mu_);
};

}  // namespace khorovod
