#include "core/completion.h"

#include "common/waiter_signal.h"
#include "khorovod/handle.h"

namespace khorovod {

void Completion::Finish(const Status& status) {
  std::vector<std::function<void(const Status&)>> callbacks;
  Status final_status;
  {
    MutexLock lock(mu_);
    if (remaining_ <= 0) return;  // already failed as a whole
    if (!status.ok() && status_.ok()) status_ = status;
    if (--remaining_ != 0) return;
    done_.store(true, std::memory_order_release);
    cv_.notify_all();
    callbacks.swap(callbacks_);
    final_status = status_;
  }
  for (auto& callback : callbacks) callback(final_status);
}

void Completion::OnDone(std::function<void(const Status&)> callback) {
  Status final_status;
  {
    MutexLock lock(mu_);
    if (remaining_ > 0) {
      callbacks_.push_back(std::move(callback));
      lock.Unlock();
      // A callback awaits the result as a blocked thread would.
      if (waiters_) waiters_->NoteAwaited();
      return;
    }
    final_status = status_;
  }
  callback(final_status);
}

void Completion::SetOutput(Tensor output, std::vector<int64_t> received_splits) {
  MutexLock lock(mu_);
  output_ = std::move(output);
  received_splits_ = std::move(received_splits);
}

void Completion::SetJoinLastRank(int rank) {
  MutexLock lock(mu_);
  join_last_rank_ = rank;
}

bool Completion::Ready() const {
  bool ready;
  {
    MutexLock lock(mu_);
    ready = remaining_ <= 0;
  }
  // A caller polling an unfinished operation awaits its result.
  if (!ready && waiters_) waiters_->NoteAwaited();
  return ready;
}

void Completion::AddBlocked(std::chrono::steady_clock::time_point since) const {
  const auto blocked = std::chrono::steady_clock::now() - since;
  wait_sink_->fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(blocked).count(),
                        std::memory_order_relaxed);
}

Status Completion::Wait() const {
  if (done_.load(std::memory_order_acquire)) {
    MutexLock lock(mu_);
    return status_;
  }
  WaiterCount blocked(waiters_.get());
  // Only a wait that actually blocks reads the clock.
  const bool timed = wait_sink_ != nullptr;
  const auto start =
      timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  // On virtual machines waking a sleeping thread can cost far more than a
  // small collective; the spin budget is zero where spinning would steal
  // the core the operation needs.
  SpinUntil([this] { return done_.load(std::memory_order_acquire); }, spin_);
  Status result;
  {
    MutexLock lock(mu_);
    lock.Wait(cv_, [&]() REQUIRES(mu_) { return remaining_ <= 0; });
    result = status_;
  }
  if (timed) AddBlocked(start);
  return result;
}

Status Completion::WaitFor(std::chrono::milliseconds timeout) const {
  const bool timed = wait_sink_ && !done_.load(std::memory_order_acquire);
  const auto start = std::chrono::steady_clock::now();
  WaiterCount blocked(done_.load(std::memory_order_acquire) ? nullptr : waiters_.get());
  MutexLock lock(mu_);
  const bool finished = lock.WaitFor(cv_, timeout, [&]() REQUIRES(mu_) { return remaining_ <= 0; });
  if (timed) AddBlocked(start);
  if (!finished) {
    return Status::DeadlineExceeded("operation still pending after " +
                                    std::to_string(timeout.count()) + " ms");
  }
  return status_;
}

Tensor Completion::TakeOutput() {
  MutexLock lock(mu_);
  return std::move(output_);
}

std::vector<int64_t> Completion::ReceivedSplits() const {
  MutexLock lock(mu_);
  return received_splits_;
}

int Completion::JoinLastRank() const {
  MutexLock lock(mu_);
  return join_last_rank_;
}

std::shared_ptr<Completion> Completion::Failed(const Status& status) {
  auto c = std::make_shared<Completion>(1);
  c->Finish(status);
  return c;
}

bool Handle::ready() const { return completion_ && completion_->Ready(); }

Status Handle::wait() const {
  if (!completion_) return Status::FailedPrecondition("wait() on an empty Handle");
  return completion_->Wait();
}

Status Handle::wait_for(std::chrono::milliseconds timeout) const {
  if (!completion_) return Status::FailedPrecondition("wait_for() on an empty Handle");
  return completion_->WaitFor(timeout);
}

Tensor Handle::take_output() const { return completion_ ? completion_->TakeOutput() : Tensor{}; }

std::vector<int64_t> Handle::received_splits() const {
  return completion_ ? completion_->ReceivedSplits() : std::vector<int64_t>{};
}

void Handle::on_done(std::function<void(const Status&)> callback) const {
  if (!completion_) {
    callback(Status::FailedPrecondition("on_done() on an empty Handle"));
    return;
  }
  completion_->OnDone(std::move(callback));
}

int Handle::join_last_rank() const { return completion_ ? completion_->JoinLastRank() : -1; }

}  // namespace khorovod
