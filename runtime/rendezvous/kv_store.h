// KvStore: the in-memory key-value store behind Gloo's rendezvous, namespaced
// by generation (one server serves one job, so the job is implicit).
//
// Values are binary strings. Add() treats a value as a decimal int64 counter
// (a missing key counts as 0) and stores the result back as decimal text, so
// Get() of a counter returns e.g. "3". Get() and Wait() block until the keys
// exist, the deadline passes, or Shutdown() is called; they never block
// without a deadline.
//
// Memory is bounded: Set/Add fail with kFull once the stored keys and values
// would exceed Limits::max_total_bytes. DropGenerationsBelow() frees old
// generations (generation 0, the namespace for non-elastic use, is kept).
//
// Closing. CloseGenerationsUpTo(g) marks generations 1..g as over (a newer
// one formed, or g lost a member and will never finish forming): Get() and
// Wait() on a closed generation no longer block for missing keys but return
// kClosed at once, so a survivor waiting for a dead peer's address goes back
// to the rendezvous instead of waiting out its timeout. Keys that exist are
// still returned; Set/Add keep working.
//
// Thread-safety: every method may be called concurrently from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "khorovod/util/mutex.h"

namespace khorovod::rendezvous {

class KvStore {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  struct Limits {
    size_t max_total_bytes = size_t(256) << 20;
  };

  enum class Result {
    kOk,
    kNotFound,    // Get: the key did not appear before the deadline
    kNotInteger,  // Add: the stored value is not a decimal int64, or the sum overflows
    kFull,        // Set/Add: the memory limit would be exceeded
    kShutdown,    // the store is shutting down
    kClosed,      // Get/Wait: the key is missing and its generation is closed
  };

  explicit KvStore(Limits limits);
  KvStore() : KvStore(Limits{}) {}

  Result Set(int64_t generation, const std::string& key, std::string value);
  Result Get(int64_t generation, const std::string& key, Deadline deadline, std::string* value);
  Result Add(int64_t generation, const std::string& key, int64_t delta, int64_t* result);
  // kOk when every key exists; kNotFound (with the absent keys in *missing,
  // in request order) when the deadline passed first.
  Result Wait(int64_t generation, const std::vector<std::string>& keys, Deadline deadline,
              std::vector<std::string>* missing);

  // Forgets generations 1 .. keep_from-1.
  void DropGenerationsBelow(int64_t keep_from);
  // Closes generations 1 .. last (see above) and wakes their waiters.
  void CloseGenerationsUpTo(int64_t last);
  // Wakes every waiter; later calls return kShutdown.
  void Shutdown();

  size_t total_bytes() const;
  size_t key_count() const;

 private:
  using Space = std::map<std::string, std::string>;
  const std::string* Lookup(int64_t generation, const std::string& key) const REQUIRES(mu_);
  Result Store(int64_t generation, const std::string& key, std::string value) REQUIRES(mu_);
  bool Closed(int64_t generation) const REQUIRES(mu_) {
    return generation != 0 && generation <= closed_up_to_;
  }

  const Limits limits_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, Space> spaces_ GUARDED_BY(mu_);
  size_t total_bytes_ GUARDED_BY(mu_) = 0;
  int64_t closed_up_to_ GUARDED_BY(mu_) = 0;  // generations 1..closed_up_to_ are closed
  bool shutdown_ GUARDED_BY(mu_) = false;
};

}  // namespace khorovod::rendezvous
