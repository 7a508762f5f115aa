#include "controller/rendezvous_probe.h"

#include <httplib.h>

#include <sstream>

namespace khorovod::op {

std::optional<int64_t> ParseRendezvousGeneration(const std::string& exposition) {
  static const std::string kName = "khorovod_rendezvous_generation ";
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, kName.size(), kName) != 0) continue;
    try {
      double v = std::stod(line.substr(kName.size()));
      if (v >= 0 && v < 9e15) return static_cast<int64_t>(v);
    } catch (const std::exception&) {
    }
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<int64_t> ProbeRendezvousGeneration(const std::string& pod_ip, int metrics_port,
                                                 std::chrono::milliseconds timeout) {
  if (pod_ip.empty()) return std::nullopt;
  const std::string host = pod_ip.find(':') != std::string::npos ? "[" + pod_ip + "]" : pod_ip;
  httplib::Client client(host, metrics_port);
  const auto s = static_cast<time_t>(timeout.count() / 1000), us = static_cast<time_t>((timeout.count() % 1000) * 1000);
  client.set_connection_timeout(s, us);
  client.set_read_timeout(s, us);
  auto res = client.Get("/metrics");
  if (!res || res->status != 200) return std::nullopt;
  return ParseRendezvousGeneration(res->body);
}

}  // namespace khorovod::op
