#include "controller/rendezvous_status.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

namespace khorovod::op {
namespace {

int64_t Count(const nlohmann::json& body, const char* key) {
  auto it = body.find(key);
  return it != body.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

}  // namespace

std::optional<RendezvousStatus> ParseRendezvousStatus(const std::string& text) {
  const nlohmann::json body = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object()) return std::nullopt;
  auto generation = body.find("generation");
  if (generation == body.end() || !generation->is_number_integer() ||
      generation->get<int64_t>() < 0)
    return std::nullopt;
  RendezvousStatus status;
  status.generation = generation->get<int64_t>();
  if (auto state = body.find("state"); state != body.end() && state->is_string())
    status.state = *state;
  status.world_size = Count(body, "world_size");
  status.pending = Count(body, "pending");
  return status;
}

std::optional<RendezvousStatus> FetchRendezvousStatus(const std::string& pod_ip, int port,
                                                      std::chrono::milliseconds timeout) {
  if (pod_ip.empty() || port <= 0) return std::nullopt;
  const std::string host = pod_ip.find(':') != std::string::npos ? "[" + pod_ip + "]" : pod_ip;
  httplib::Client client(host, port);
  const auto s = static_cast<time_t>(timeout.count() / 1000),
             us = static_cast<time_t>((timeout.count() % 1000) * 1000);
  client.set_connection_timeout(s, us);
  client.set_read_timeout(s, us);
  client.set_write_timeout(s, us);
  auto res = client.Get("/v1/status");
  if (!res || res->status != 200) return std::nullopt;
  return ParseRendezvousStatus(res->body);
}

}  // namespace khorovod::op
