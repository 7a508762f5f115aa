// TokenBucket: the client-side limit on how fast the operator talks to the
// API server (--kube-api-qps / --kube-api-burst).
//
// The bucket holds at most `burst` tokens and gains `qps` tokens per second;
// each request takes one. A request that finds the bucket empty reserves the
// next token anyway and waits until it is due, so waiting requests are served
// in arrival order and the long-run rate never exceeds `qps`, however many
// reconciles run at once (a storm of job changes becomes a queue, not a flood).
// qps <= 0 disables the limit.
//
// Time comes from a Clock so tests drive it by hand; SteadyClock is the real
// one.
//
// Thread-safety: Reserve/Wait may be called from any thread concurrently.
#pragma once

#include <chrono>
#include <mutex>

#include "khorovod/util/mutex.h"

namespace khorovod::kube {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  virtual TimePoint Now() = 0;
  virtual void SleepUntil(TimePoint t) = 0;
};

class SteadyClock : public Clock {
 public:
  TimePoint Now() override;
  void SleepUntil(TimePoint t) override;
};

struct RateLimit {
  double qps = 0;  // <= 0: unlimited
  int burst = 1;   // tokens available at once (at least 1)
};

class TokenBucket {
 public:
  // `clock` must outlive the bucket; nullptr uses a SteadyClock.
  explicit TokenBucket(RateLimit limit, Clock* clock = nullptr);

  // Takes one token; returns how long the caller must wait before using it
  // (zero when one was available).
  std::chrono::nanoseconds Reserve();
  // Reserve, then sleep for the returned time. Returns the time waited.
  std::chrono::nanoseconds Wait();

  const RateLimit& limit() const { return limit_; }

 private:
  const RateLimit limit_;
  SteadyClock steady_;
  Clock* const clock_;
  Mutex mu_;
  double tokens_ GUARDED_BY(mu_);          // may go negative: reserved tokens not yet due
  Clock::TimePoint last_ GUARDED_BY(mu_);  // when tokens_ was last brought up to date
};

}  // namespace khorovod::kube
