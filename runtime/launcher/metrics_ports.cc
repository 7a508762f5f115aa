#include "launcher/metrics_ports.h"

#include <charconv>

namespace khorovod::launcher {

StatusOr<MetricsPorts> MetricsPortsFromEnv(const std::vector<std::string>& env, int slots) {
  const std::string prefix = "KHOROVOD_METRICS_PORT=";
  std::string value;
  for (const std::string& entry : env) {
    if (entry.compare(0, prefix.size(), prefix) == 0) value = entry.substr(prefix.size());
  }
  MetricsPorts ports;
  if (value.empty()) return ports;
  int base = -1;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), base);
  if (ec != std::errc() || end != value.data() + value.size() || base < 0 ||
      static_cast<long>(base) + slots > 65535) {
    return Status::InvalidArgument(
        "KHOROVOD_METRICS_PORT='" + value + "': expected a base port B with B + " +
        std::to_string(slots) +
        " <= 65535 (the rendezvous server uses B, worker slot i uses B + 1 + i)");
  }
  ports.base = base;
  return ports;
}

}  // namespace khorovod::launcher
