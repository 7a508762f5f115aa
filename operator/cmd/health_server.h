// HealthServer: the operator's own HTTP endpoint (--metrics-bind):
//   GET /healthz  200 while the process serves;
//   GET /readyz   200 when ready() says so, else 503;
//   GET /metrics  the Prometheus exposition from render().
//
// Thread-safety: Start and Stop from the owning thread; the callbacks run on
// the server's threads.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace khorovod::op {

class HealthServer {
 public:
  HealthServer(std::function<bool()> ready, std::function<std::string()> render);
  ~HealthServer();

  // Binds host:port and serves on a thread; false (with a message) when it
  // cannot listen.
  bool Start(const std::string& host_port, std::string* error);
  void Stop();

 private:
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
};

}  // namespace khorovod::op
