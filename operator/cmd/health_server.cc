#include "cmd/health_server.h"

#include <httplib.h>

#include <cstdlib>

#include "khorovod/metrics/exposition.h"

namespace khorovod::op {

HealthServer::HealthServer(std::function<bool()> ready, std::function<std::string()> render)
    : http_(std::make_unique<httplib::Server>()) {
  http_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  http_->Get("/readyz", [ready](const httplib::Request&, httplib::Response& res) {
    const bool ok = ready();
    res.status = ok ? 200 : 503;
    res.set_content(ok ? "ok\n" : "caches not synced\n", "text/plain");
  });
  http_->Get("/metrics", [render](const httplib::Request&, httplib::Response& res) {
    res.set_content(render(), metrics::kContentType);
  });
}

HealthServer::~HealthServer() { Stop(); }

bool HealthServer::Start(const std::string& host_port, std::string* error) {
  const auto colon = host_port.rfind(':');
  const std::string host = host_port.substr(0, colon);
  const int port = std::atoi(host_port.substr(colon + 1).c_str());
  if (colon == std::string::npos || !http_->bind_to_port(host.c_str(), port)) {
    *error = "cannot listen on " + host_port;
    return false;
  }
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  return true;
}

void HealthServer::Stop() {
  http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace khorovod::op
