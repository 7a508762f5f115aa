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

SpinPolicy SpinPolicy::ForConfig(const Config& config) {
  return Resolve(config.spin_waits, config.local_size, AllowedCores());
}

}  // namespace khorovod
