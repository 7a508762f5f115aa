#include "kube/work_queue.h"

#include <algorithm>
#include <cmath>

namespace khorovod::kube {

WorkQueue::WorkQueue(WorkQueueOptions options) : options_(options) {
  delay_thread_ = std::thread([this] { DelayLoop(); });
}

WorkQueue::~WorkQueue() {
  ShutDown();
  if (delay_thread_.joinable()) delay_thread_.join();
}

void WorkQueue::Add(const std::string& key) {
  MutexLock lock(mu_);
  if (shutting_down_ || dirty_.count(key)) return;
  dirty_.insert(key);
  if (processing_.count(key)) return;  // re-queued by Done()
  queue_.push_back(key);
  cv_.notify_one();
}

void WorkQueue::AddAfter(const std::string& key, std::chrono::milliseconds delay) {
  if (delay.count() <= 0) return Add(key);
  MutexLock lock(mu_);
  if (shutting_down_) return;
  delayed_.emplace(std::chrono::steady_clock::now() + delay, key);
  delay_cv_.notify_one();
}

void WorkQueue::AddRateLimited(const std::string& key) {
  std::chrono::milliseconds delay;
  {
    MutexLock lock(mu_);
    int n = failures_[key]++;
    double d = static_cast<double>(options_.base_delay.count()) * std::pow(2.0, std::min(n, 30));
    delay = std::chrono::milliseconds(
        static_cast<int64_t>(std::min(d, static_cast<double>(options_.max_delay.count()))));
  }
  AddAfter(key, delay);
}

void WorkQueue::Forget(const std::string& key) {
  MutexLock lock(mu_);
  failures_.erase(key);
}

int WorkQueue::Failures(const std::string& key) const {
  MutexLock lock(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

bool WorkQueue::Get(std::string& key) {
  MutexLock lock(mu_);
  lock.Wait(cv_, [this]() REQUIRES(mu_) { return !queue_.empty() || shutting_down_; });
  if (queue_.empty()) return false;
  key = queue_.front();
  queue_.pop_front();
  processing_.insert(key);
  dirty_.erase(key);
  return true;
}

void WorkQueue::Done(const std::string& key) {
  MutexLock lock(mu_);
  processing_.erase(key);
  if (dirty_.count(key) && !shutting_down_) {
    queue_.push_back(key);
    cv_.notify_one();
  }
}

void WorkQueue::ShutDown() {
  MutexLock lock(mu_);
  shutting_down_ = true;
  cv_.notify_all();
  delay_cv_.notify_all();
}

size_t WorkQueue::Depth() const {
  MutexLock lock(mu_);
  return queue_.size();
}

void WorkQueue::DelayLoop() {
  MutexLock lock(mu_);
  while (!shutting_down_) {
    if (delayed_.empty()) {
      lock.Wait(delay_cv_);
      continue;
    }
    auto due = delayed_.begin()->first;
    if (std::chrono::steady_clock::now() < due) {
      lock.WaitUntil(delay_cv_, due);
      continue;
    }
    std::string key = delayed_.begin()->second;
    delayed_.erase(delayed_.begin());
    if (!dirty_.count(key)) {
      dirty_.insert(key);
      if (!processing_.count(key)) {
        queue_.push_back(key);
        cv_.notify_one();
      }
    }
  }
}

}  // namespace khorovod::kube
