// RendezvousServer: the HTTP face of the rendezvous service (cpp-httplib).
//
// It routes requests to a RendezvousService, enforces the bearer token on
// every path but /healthz (constant-time comparison), validates every body
// strictly (JsonRequest: wrong types and unknown fields are 400), limits
// body size (413) and path length (414), and answers every error with a JSON
// body {"error": "...", "code": "..."}; see README.md for the API table.
//
// Lifecycle:
//   RendezvousServer server(options);
//   khorovod::Status s = server.Start();   // binds, then serves on a thread
//   ... server.port() ...
//   server.Stop();                         // or from another thread / a signal thread
//   server.Wait();                         // returns once stopped
//
// Thread-safety: Start() once, from one thread; Stop(), Wait(), port() and
// service() from any thread. The destructor stops the server.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "khorovod/metrics/http_endpoint.h"
#include "khorovod/status.h"
#include "khorovod/util/mutex.h"
#include "service.h"

namespace httplib {
class Server;
}

namespace khorovod::rendezvous {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;                     // 0: an ephemeral port, see port()
  std::string token;                // required, non-empty
  size_t max_body_bytes = 1 << 20;  // larger bodies get 413
  int http_threads = 0;             // 0: clamp(2 * max_workers + 16, 32, 256)
  // Also serve GET /metrics without a token on host:metrics_port (0: an
  // ephemeral port, -1: not at all). The main port serves /metrics to
  // token holders either way.
  int metrics_port = -1;
  ServiceOptions service;
};

class RendezvousServer {
 public:
  explicit RendezvousServer(ServerOptions options);
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  // Validates the options, binds host:port and starts serving. Returns
  // kInvalidArgument for bad options, kUnavailable when the bind fails.
  Status Start();
  // Stops accepting, wakes long-polls (they answer 503), joins the serving
  // threads. Idempotent.
  void Stop();
  // Blocks until Stop() has completed.
  void Wait();

  // The bound port (valid after a successful Start()).
  int port() const { return port_; }
  const std::string& host() const { return options_.host; }
  // The unauthenticated metrics port, or -1 when not served.
  int metrics_port() const { return metrics_ ? metrics_->port() : -1; }
  RendezvousService& service() { return *service_; }

 private:
  void InstallErrorHandlers();
  void InstallRoutes();

  const ServerOptions options_;
  std::unique_ptr<RendezvousService> service_;
  std::unique_ptr<httplib::Server> http_;
  std::unique_ptr<metrics::MetricsEndpoint> metrics_;
  std::thread listener_;
  int port_ = -1;

  Mutex stop_mu_;
  std::condition_variable stopped_cv_;
  bool started_ GUARDED_BY(stop_mu_) = false;
  bool stopped_ GUARDED_BY(stop_mu_) = false;
};

}  // namespace khorovod::rendezvous
