// MetricsEndpoint: see khorovod/metrics/http_endpoint.h.
#include "khorovod/metrics/http_endpoint.h"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>

#include "khorovod/metrics/exposition.h"

namespace khorovod::metrics {

MetricsEndpoint::MetricsEndpoint(EndpointOptions options, RenderFn render)
    : options_(std::move(options)), render_(std::move(render)) {}

MetricsEndpoint::~MetricsEndpoint() { Stop(); }

Status MetricsEndpoint::Start() {
  const std::string where = options_.host + ":" + std::to_string(options_.port);
  MutexLock lock(mu_);
  if (http_) return Status::FailedPrecondition("the metrics endpoint was already started");
  if (options_.port < 0 || options_.port > 65535) {
    return Status::InvalidArgument("metrics port " + std::to_string(options_.port) +
                                   " is outside 0..65535");
  }
  if (options_.threads < 1)
    return Status::InvalidArgument("the metrics endpoint needs at least one thread");
  http_ = std::make_unique<httplib::Server>();
  const size_t threads = static_cast<size_t>(options_.threads);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // cpp-httplib's default sets SO_REUSEPORT, which would let a second
  // process bind the same port and receive half the scrapes; a metrics port
  // must belong to one process. SO_REUSEADDR alone still allows a restart
  // while old connections linger in TIME_WAIT.
  http_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http_->set_read_timeout(5, 0);
  http_->set_write_timeout(5, 0);
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(render_(), kContentType);
  });
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        res.status = 500;
        res.set_content("metrics rendering failed\n", "text/plain");
      });
  port_ = options_.port == 0
              ? http_->bind_to_any_port(options_.host)
              : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port_ <= 0) {
    port_ = -1;
    http_.reset();
    return Status::Unavailable("cannot serve metrics on " + where +
                               " (address in use or not local?)");
  }
  httplib::Server* server = http_.get();
  listener_ = std::thread([server] { server->listen_after_bind(); });
  // stop() is only reliable once the accept loop runs; wait (bounded) for it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!server->is_running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::Ok();
}

void MetricsEndpoint::Stop() {
  MutexLock lock(mu_);
  if (!http_) return;
  http_->stop();
  if (listener_.joinable()) listener_.join();
  http_.reset();
}

}  // namespace khorovod::metrics
