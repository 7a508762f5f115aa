// Measures what this machine charges for sleeping and for waking a sleeping
// thread: the floor under any small-message latency of a runtime that hands
// work between threads. Prints the mean and the worst case of 50 samples.
//
//   build/bench/bin/khorovod-wake-latency-probe
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

int main() {
  using Clock = std::chrono::steady_clock;
  using Micros = std::chrono::duration<double, std::micro>;
  for (int us : {50, 200, 1000, 2000}) {
    double total = 0, worst = 0;
    for (int i = 0; i < 50; ++i) {
      const auto t = Clock::now();
      std::this_thread::sleep_for(std::chrono::microseconds(us));
      const double took = Micros(Clock::now() - t).count();
      total += took;
      worst = std::max(worst, took);
    }
    std::printf("sleep_for(%d us): mean %.0f us, worst %.0f us\n", us, total / 50, worst);
  }
  double total = 0, worst = 0;
  for (int i = 0; i < 50; ++i) {
    std::mutex mu;
    std::condition_variable cv;
    bool ready = false;
    Clock::time_point notified, woke;
    std::thread waiter([&] {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return ready; });
      woke = Clock::now();
    });
    // Let the waiter fall asleep, as an idle background thread would.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    {
      std::lock_guard<std::mutex> lock(mu);
      ready = true;
      notified = Clock::now();
    }
    cv.notify_one();
    waiter.join();
    const double took = Micros(woke - notified).count();
    total += took;
    worst = std::max(worst, took);
  }
  std::printf("condition-variable wake-up after 2 ms idle: mean %.0f us, worst %.0f us\n",
              total / 50, worst);
  return 0;
}
