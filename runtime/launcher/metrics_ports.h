// MetricsPorts: the Prometheus metrics ports of a local job, derived from one
// base port. With KHOROVOD_METRICS_PORT=B in khorovodrun's environment:
//   B          the job's rendezvous server (elastic jobs; unauthenticated)
//   B + 1 + i  worker slot i (0 <= i < -np), passed to the worker as its own
//              KHOROVOD_METRICS_PORT
// A replacement worker takes the slot of the worker it replaces, so the
// ports stay a fixed set that Prometheus can list as static targets.
// Unset or 0: no metrics; workers get the launcher's environment unchanged.
//
// Pure functions; thread-safety: value types.
#pragma once

#include <string>
#include <vector>

#include "khorovod/status.h"

namespace khorovod::launcher {

struct MetricsPorts {
  int base = 0;  // 0: off
  bool enabled() const { return base > 0; }
  int server() const { return base; }
  int worker(int slot) const { return enabled() ? base + 1 + slot : 0; }
};

// Reads KHOROVOD_METRICS_PORT from `env` ("NAME=VALUE" entries).
// kInvalidArgument, naming the variable, when the value is not an integer
// or B + slots > 65535.
StatusOr<MetricsPorts> MetricsPortsFromEnv(const std::vector<std::string>& env, int slots);

}  // namespace khorovod::launcher
