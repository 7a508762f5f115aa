#include "core/tensor_queue.h"

#include <algorithm>
#include <thread>

namespace khorovod {

Status TensorQueue::Push(std::vector<PendingOp> ops) {
  {
    MutexLock lock(mu_);
    if (closed_) return closed_reason_;
    std::unordered_set<std::string> batch;
    for (const PendingOp& op : ops) {
      const std::string& name = op.request.name;
      if (in_flight_.count(name) || !batch.insert(name).second) {
        return Status::AlreadyExists("a tensor named '" + name +
                                     "' is already in flight on this rank; names must be unique "
                                     "until the operation completes");
      }
    }
    for (PendingOp& op : ops) {
      incoming_bytes_.fetch_add(op.input.num_bytes(), std::memory_order_acq_rel);
      in_flight_.insert(op.request.name);
      incoming_.push_back(std::move(op));
    }
    has_incoming_.store(true, std::memory_order_release);
    submissions_.fetch_add(1, std::memory_order_acq_rel);
  }
  cv_.notify_one();
  waiters_->Poke();
  return Status::Ok();
}

void TensorQueue::PopAll(std::vector<PendingOp>* out) {
  MutexLock lock(mu_);
  for (auto& op : incoming_) out->push_back(std::move(op));
  incoming_.clear();
  incoming_bytes_.store(0, std::memory_order_release);
  awaited_at_pop_.store(waiters_->awaited(), std::memory_order_release);
  has_incoming_.store(false, std::memory_order_release);
}

void TensorQueue::Complete(const PendingOp& op, const Status& status) {
  {
    MutexLock lock(mu_);
    in_flight_.erase(op.request.name);
  }
  op.completion->Finish(status);
}

void TensorQueue::WaitForWork(std::chrono::steady_clock::time_point deadline,
                              std::chrono::microseconds spin) {
  const auto spin_until = std::min(deadline, std::chrono::steady_clock::now() + spin);
  while (!has_incoming_.load(std::memory_order_acquire) &&
         std::chrono::steady_clock::now() < spin_until) {
    std::this_thread::yield();
  }
  MutexLock lock(mu_);
  lock.WaitUntil(cv_, deadline,
                 [&]() REQUIRES(mu_) { return !incoming_.empty() || shutdown_requested_; });
}

void TensorQueue::RequestShutdown() {
  {
    MutexLock lock(mu_);
    shutdown_requested_ = true;
  }
  cv_.notify_one();
}

bool TensorQueue::shutdown_requested() const {
  MutexLock lock(mu_);
  return shutdown_requested_;
}

void TensorQueue::Close(const Status& reason) {
  MutexLock lock(mu_);
  closed_ = true;
  closed_reason_ = reason.ok() ? Status::Internal("queue closed without a reason") : reason;
}

}  // namespace khorovod
