#include "common/waiter_signal.h"

#include <sched.h>

namespace khorovod {

int AllowedCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    // No mask to read (a seccomp filter, say): assume the hardware's count.
    const unsigned n = std::thread::hardware_concurrency();
    return n > 0 ? static_cast<int>(n) : 1;
  }
  const int n = CPU_COUNT(&set);
  return n > 0 ? n : 1;
}

SpinPolicy SpinPolicy::Resolve(SpinWaits setting, int local_size, int allowed_cores) {
  switch (setting) {
    case SpinWaits::kOn:
      return SpinPolicy(true);
    case SpinWaits::kOff:
      return SpinPolicy(false);
    case SpinWaits::kAuto:
      break;
  }
  return SpinPolicy(allowed_cores >= local_size);
}

void WaiterBoard::Enter() {
  blocked_.fetch_add(1, std::memory_order_acq_rel);
  Poke();
}

void WaiterBoard::NoteAwaited() {
  awaited_.fetch_add(1, std::memory_order_acq_rel);
  Poke();
}

void WaiterBoard::Poke() {
  {
    MutexLock lock(mu_);
    changes_.fetch_add(1, std::memory_order_acq_rel);
  }
  cv_.notify_all();
}

void WaiterBoard::WaitForChange(uint64_t seen, std::chrono::steady_clock::time_point deadline) {
  MutexLock lock(mu_);
  lock.WaitUntil(cv_, deadline, [&] { return changes_.load(std::memory_order_acquire) != seen; });
}

SpinPolicy SpinPolicy::ForConfig(const Config& config) {
  return Resolve(config.spin_waits, config.local_size, AllowedCores());
}

}  // namespace khorovod
