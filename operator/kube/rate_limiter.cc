#include "kube/rate_limiter.h"

#include <algorithm>
#include <thread>

namespace khorovod::kube {

Clock::TimePoint SteadyClock::Now() { return std::chrono::steady_clock::now(); }
void SteadyClock::SleepUntil(TimePoint t) { std::this_thread::sleep_until(t); }

TokenBucket::TokenBucket(RateLimit limit, Clock* clock)
    : limit_{limit.qps, std::max(limit.burst, 1)},
      clock_(clock ? clock : &steady_),
      tokens_(limit_.burst),
      last_(clock_->Now()) {}

std::chrono::nanoseconds TokenBucket::Reserve() {
  if (limit_.qps <= 0) return std::chrono::nanoseconds(0);
  MutexLock lock(mu_);
  const Clock::TimePoint now = clock_->Now();
  if (now > last_) {
    const double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min<double>(limit_.burst, tokens_ + elapsed * limit_.qps);
    last_ = now;
  }
  tokens_ -= 1;
  if (tokens_ >= 0) return std::chrono::nanoseconds(0);
  // The token is due when the deficit has been refilled.
  return std::chrono::nanoseconds(static_cast<int64_t>(-tokens_ / limit_.qps * 1e9 + 0.5));
}

std::chrono::nanoseconds TokenBucket::Wait() {
  const Clock::TimePoint start = clock_->Now();
  const std::chrono::nanoseconds wait = Reserve();
  if (wait.count() > 0) clock_->SleepUntil(start + wait);
  return wait;
}

}  // namespace khorovod::kube
