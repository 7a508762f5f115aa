// MetricsEndpoint: serves a metrics exposition at GET /metrics over HTTP
// (cpp-httplib), for Prometheus to scrape. Unauthenticated: metrics carry no
// secrets, and a scraper should not need a job's token.
//
//   prometheus::Registry registry;
//   metrics::MetricsEndpoint endpoint({.host = "0.0.0.0", .port = 9100},
//                                     [&] { return metrics::Render({&registry}); });
//   if (Status s = endpoint.Start(); !s.ok()) { ... report s ... }
//   ... endpoint.port() ...   // the bound port (useful with port 0)
//   endpoint.Stop();          // also done by the destructor
//
// Contract: Start() binds before it returns, so a scrape right after a
// successful Start() connects. It fails with kInvalidArgument when the
// options are invalid, kUnavailable with a message naming the address when
// the bind fails (port in use), kFailedPrecondition when already started. Any
// other path answers 404; a render that throws answers 500. What the render
// function reads must outlive the endpoint.
//
// Thread-safety: Start() once, from one thread; Stop() and port() from any
// thread; requests are served on the endpoint's own threads.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "khorovod/status.h"
#include "khorovod/util/mutex.h"

namespace httplib {
class Server;
}

namespace khorovod::metrics {

struct EndpointOptions {
  std::string host = "127.0.0.1";  // "0.0.0.0" to be scraped from other hosts
  int port = 0;                    // 0: an ephemeral port, see port()
  int threads = 2;                 // serving threads; scrapes are rare and short
};

class MetricsEndpoint {
 public:
  using RenderFn = std::function<std::string()>;

  MetricsEndpoint(EndpointOptions options, RenderFn render);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  Status Start();
  void Stop();  // idempotent
  int port() const { return port_; }

 private:
  const EndpointOptions options_;
  const RenderFn render_;
  std::unique_ptr<httplib::Server> http_ GUARDED_BY(mu_);
  std::thread listener_;
  int port_ = -1;
  Mutex mu_;
};

}  // namespace khorovod::metrics
