// TokenBucket: burst, sustained rate, arrival-order waits, refill cap, and the
// unlimited setting, all on a hand-driven clock (no sleeping, no timing).
#include "kube/rate_limiter.h"

#include <gtest/gtest.h>

namespace khorovod::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

// Time moves only when the test (or a SleepUntil) moves it.
class FakeClock : public Clock {
 public:
  TimePoint Now() override { return now_; }
  void SleepUntil(TimePoint t) override {
    ++sleeps_;
    if (t > now_) now_ = t;
  }
  void Advance(nanoseconds d) { now_ += d; }
  int sleeps() const { return sleeps_; }

 private:
  TimePoint now_{};
  int sleeps_ = 0;
};

TEST(TokenBucket, ABurstPassesAtOnceThenRequestsAreSpacedAtTheRate) {
  FakeClock clock;
  TokenBucket bucket({/*qps=*/10, /*burst=*/3}, &clock);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bucket.Reserve(), nanoseconds(0)) << "request " << i;
  // The bucket is empty: the next reservations are due 100 ms apart.
  EXPECT_EQ(bucket.Reserve(), milliseconds(100));
  EXPECT_EQ(bucket.Reserve(), milliseconds(200));
  EXPECT_EQ(bucket.Reserve(), milliseconds(300));
}

TEST(TokenBucket, WaitSleepsUntilTheTokenIsDueAndKeepsTheLongRunRate) {
  FakeClock clock;
  TokenBucket bucket({/*qps=*/50, /*burst=*/5}, &clock);
  const auto start = clock.Now();
  for (int i = 0; i < 105; ++i) bucket.Wait();
  // 5 from the burst, then 100 at 50/s: exactly 2 s of (fake) waiting.
  EXPECT_EQ(clock.Now() - start, milliseconds(2000));
  EXPECT_EQ(clock.sleeps(), 100);
}

TEST(TokenBucket, IdleTimeRefillsButNeverBeyondTheBurst) {
  FakeClock clock;
  TokenBucket bucket({/*qps=*/2, /*burst=*/4}, &clock);
  for (int i = 0; i < 4; ++i) bucket.Reserve();
  clock.Advance(milliseconds(1000));  // two tokens back
  EXPECT_EQ(bucket.Reserve(), nanoseconds(0));
  EXPECT_EQ(bucket.Reserve(), nanoseconds(0));
  EXPECT_EQ(bucket.Reserve(), milliseconds(500));
  clock.Advance(std::chrono::hours(1));  // a long idle spell refills only to the burst
  for (int i = 0; i < 4; ++i) EXPECT_EQ(bucket.Reserve(), nanoseconds(0)) << "request " << i;
  EXPECT_EQ(bucket.Reserve(), milliseconds(500));
}

TEST(TokenBucket, ReservationsAlreadyQueuedDelayLaterArrivals) {
  FakeClock clock;
  TokenBucket bucket({/*qps=*/4, /*burst=*/1}, &clock);
  EXPECT_EQ(bucket.Reserve(), nanoseconds(0));
  EXPECT_EQ(bucket.Reserve(), milliseconds(250));
  EXPECT_EQ(bucket.Reserve(), milliseconds(500));
  // 100 ms later the queue is 100 ms shorter, not forgotten.
  clock.Advance(milliseconds(100));
  EXPECT_EQ(bucket.Reserve(), milliseconds(650));
}

TEST(TokenBucket, ZeroQpsMeansUnlimited) {
  FakeClock clock;
  TokenBucket bucket({/*qps=*/0, /*burst=*/1}, &clock);
  for (int i = 0; i < 10000; ++i) ASSERT_EQ(bucket.Wait(), nanoseconds(0));
  EXPECT_EQ(clock.sleeps(), 0);
}

TEST(TokenBucket, ABurstBelowOneStillAdmitsOneRequest) {
  FakeClock clock;
  TokenBucket bucket({/*qps=*/1, /*burst=*/0}, &clock);
  EXPECT_EQ(bucket.limit().burst, 1);
  EXPECT_EQ(bucket.Reserve(), nanoseconds(0));
  EXPECT_EQ(bucket.Reserve(), milliseconds(1000));
}

}  // namespace
}  // namespace khorovod::kube
