// WorkQueue: the controller's queue of object keys to reconcile.
//
// Semantics (those of client-go's rate-limited workqueue):
//   - de-duplication: a key added several times before a worker takes it is
//     processed once;
//   - per-key serialization: a key being processed is never handed to a
//     second worker; adding it meanwhile marks it dirty, and it is queued
//     again when Done() is called;
//   - AddAfter delays a key; AddRateLimited delays it exponentially
//     (base * 2^failures, capped) until Forget() resets its failure count;
//   - ShutDown wakes every Get(), which then returns false.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "khorovod/util/mutex.h"

namespace khorovod::kube {

struct WorkQueueOptions {
  std::chrono::milliseconds base_delay{5};
  std::chrono::milliseconds max_delay{60000};
};

class WorkQueue {
 public:
  explicit WorkQueue(WorkQueueOptions options = {});
  ~WorkQueue();

  void Add(const std::string& key);
  void AddAfter(const std::string& key, std::chrono::milliseconds delay);
  void AddRateLimited(const std::string& key);
  void Forget(const std::string& key);
  int Failures(const std::string& key) const;

  // Blocks until a key is available (true) or the queue is shut down (false).
  bool Get(std::string& key);
  void Done(const std::string& key);
  void ShutDown();

  // Keys waiting (not counting delayed or in-process ones).
  size_t Depth() const;

 private:
  void DelayLoop();

  const WorkQueueOptions options_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_ GUARDED_BY(mu_);
  std::set<std::string> dirty_ GUARDED_BY(mu_);
  std::set<std::string> processing_ GUARDED_BY(mu_);
  std::multimap<std::chrono::steady_clock::time_point, std::string> delayed_ GUARDED_BY(mu_);
  std::map<std::string, int> failures_ GUARDED_BY(mu_);
  bool shutting_down_ GUARDED_BY(mu_) = false;
  std::condition_variable delay_cv_;
  std::thread delay_thread_;
};

}  // namespace khorovod::kube
