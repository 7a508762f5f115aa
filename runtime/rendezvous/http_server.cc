#include "http_server.h"

#include <httplib.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <functional>
#include <limits>

#include "json_request.h"
#include "khorovod/metrics/exposition.h"
#include "khorovod/util/base64.h"
#include "protocol.h"

namespace khorovod::rendezvous {
namespace {

using nlohmann::json;
using Handler = std::function<Reply(const httplib::Request&)>;

constexpr size_t kMaxPathLength = 1024;  // also keeps std::regex matching shallow
constexpr size_t kMaxWaitKeys = 1024;
constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();

// Compares in time that depends only on the expected token's length.
bool ConstantTimeEquals(std::string_view given, std::string_view expected) {
  unsigned char diff = given.size() != expected.size() ? 1 : 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= static_cast<unsigned char>(g ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

void Send(httplib::Response& res, const Reply& reply) {
  res.status = reply.status;
  if (auto it = reply.body.find("retry_after_ms");
      it != reply.body.end() && it->is_number_integer()) {
    res.set_header("Retry-After", std::to_string((it->get<int64_t>() + 999) / 1000));
  }
  if (reply.status == 401) res.set_header("WWW-Authenticate", "Bearer");
  // Path components may hold arbitrary bytes; never let dump() throw on them.
  res.set_content(reply.body.dump(-1, ' ', false, json::error_handler_t::replace),
                  kJsonContentType);
}

Reply BadRequest(std::string message) {
  return ErrorReply(400, error_code::kInvalidArgument, std::move(message));
}

// A generation path component: decimal digits only.
bool ParseGeneration(const std::string& text, int64_t* out) {
  if (text.empty() || text.size() > 18) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size() && text[0] != '-' && text[0] != '+';
}

bool Authorized(const httplib::Request& req, const std::string& token) {
  const std::string prefix = "Bearer ";
  std::string header = req.get_header_value("Authorization");
  if (header.compare(0, prefix.size(), prefix) != 0) return false;
  return ConstantTimeEquals(std::string_view(header).substr(prefix.size()), token);
}

Reply Unauthenticated() {
  return ErrorReply(401, error_code::kUnauthenticated, "missing or invalid bearer token");
}

// The JSON error for a request no handler answered (httplib's own status).
Reply ErrorFor(const httplib::Request& req, int status, bool authorized) {
  if (status == 404 && !authorized) return Unauthenticated();
  if (status == 404)
    return ErrorReply(404, error_code::kNotFound,
                      "no such endpoint: " + req.method + " " + req.path);
  if (status == 413)
    return ErrorReply(413, error_code::kPayloadTooLarge, "the request body is too large");
  if (status == 414) return ErrorReply(414, error_code::kUriTooLong, "the request URI is too long");
  if (status >= 500) return ErrorReply(status, error_code::kInternal, "internal server error");
  return ErrorReply(status, error_code::kInvalidArgument, "malformed HTTP request");
}

// --- request handlers: path matches and body in, service reply out --------

Reply HandleJobStatus(RendezvousService& svc, const httplib::Request&) { return svc.JobStatus(); }

Reply HandleRegister(RendezvousService& svc, const httplib::Request& req) {
  std::string err;
  auto body = JsonRequest::Parse(req.body, &err);
  if (!body) return BadRequest(err);
  WorkerSpec spec;
  spec.name = body->String("name", JsonRequest::kRequired, kMaxNameLength);
  spec.address = body->String("address", JsonRequest::kRequired, kMaxAddressLength);
  spec.slots = static_cast<int>(body->Int("slots", JsonRequest::kRequired, 1, kMaxSlots));
  spec.slot = static_cast<int>(body->Int("slot", JsonRequest::kOptional, -1, kMaxSlots - 1, -1));
  spec.incarnation = body->String("incarnation", JsonRequest::kOptional, kMaxNameLength);
  spec.node = body->String("node", JsonRequest::kOptional, kMaxNameLength);
  if (!body->Finish(&err)) return BadRequest(err);
  if (!spec.node.empty() && !IsValidName(spec.node)) return BadRequest("invalid node name");
  return svc.Register(spec);
}

// heartbeat | leave | failure | generation, for the worker in matches[2].
Reply HandleWorkerVerb(RendezvousService& svc, const httplib::Request& req) {
  std::string name = req.matches[2].str();
  std::string verb = req.matches[3].str();
  if (!IsValidName(name)) return BadRequest("invalid worker name in the path");
  std::string err;
  auto body = JsonRequest::Parse(req.body, &err);
  if (!body) return BadRequest(err);
  const std::string incarnation =
      body->String("incarnation", JsonRequest::kOptional, kMaxNameLength);
  if (verb == "heartbeat") {
    if (!body->Finish(&err)) return BadRequest(err);
    return svc.Heartbeat(name, incarnation);
  }
  if (verb == "generation") {
    int64_t after = body->Int("after", JsonRequest::kRequired, 0, kMaxInt);
    int64_t timeout = body->Int("timeout_ms", JsonRequest::kOptional, 0, kMaxInt, 0);
    if (!body->Finish(&err)) return BadRequest(err);
    return svc.AwaitNext(name, after, Millis(timeout), incarnation);
  }
  std::string reason = body->String("reason", JsonRequest::kOptional, kMaxReasonLength);
  if (!body->Finish(&err)) return BadRequest(err);
  return verb == "leave" ? svc.Leave(name, reason, incarnation)
                         : svc.ReportFailure(name, reason, incarnation);
}

// set | get | add | wait on the store of the generation in matches[2].
Reply HandleKv(RendezvousService& svc, const httplib::Request& req) {
  int64_t generation = 0;
  if (!ParseGeneration(req.matches[2].str(), &generation)) {
    return BadRequest("the generation in the path must be a non-negative integer");
  }
  std::string op = req.matches[3].str();
  std::string err;
  auto body = JsonRequest::Parse(req.body, &err);
  if (!body) return BadRequest(err);
  if (op == "wait") {
    auto keys = body->StringArray("keys", JsonRequest::kRequired, kMaxWaitKeys, kMaxKeyLength);
    int64_t timeout = body->Int("timeout_ms", JsonRequest::kOptional, 0, kMaxInt, 0);
    if (!body->Finish(&err)) return BadRequest(err);
    return svc.KvWait(generation, keys, Millis(timeout));
  }
  std::string key = body->String("key", JsonRequest::kRequired, kMaxKeyLength);
  if (op == "set") {
    std::string value = body->String("value", JsonRequest::kRequired, std::string::npos);
    if (!body->Finish(&err)) return BadRequest(err);
    if (key.empty()) return BadRequest("field 'key' must not be empty");
    auto bytes = Base64Decode(value);
    if (!bytes) return BadRequest("field 'value' must be base64 (RFC 4648, padded)");
    return svc.KvSet(generation, key, std::move(*bytes));
  }
  if (op == "get") {
    int64_t timeout = body->Int("timeout_ms", JsonRequest::kOptional, 0, kMaxInt, 0);
    if (!body->Finish(&err)) return BadRequest(err);
    return svc.KvGet(generation, key, Millis(timeout));
  }
  int64_t delta =
      body->Int("delta", JsonRequest::kRequired, std::numeric_limits<int64_t>::min(), kMaxInt);
  if (!body->Finish(&err)) return BadRequest(err);
  return svc.KvAdd(generation, key, delta);
}

}  // namespace

RendezvousServer::RendezvousServer(ServerOptions options) : options_(std::move(options)) {}

RendezvousServer::~RendezvousServer() { Stop(); }

Status RendezvousServer::Start() {
  if (options_.token.empty()) return Status::InvalidArgument("a rendezvous token is required");
  if (!IsValidName(options_.service.job)) {
    return Status::InvalidArgument("job name must match [A-Za-z0-9][A-Za-z0-9._:-]{0,252}");
  }
  if (std::string e = options_.service.policy.Validate(); !e.empty())
    return Status::InvalidArgument(e);
  if (options_.port < 0 || options_.port > 65535)
    return Status::InvalidArgument("port must be 0..65535");
  if (options_.max_body_bytes < 1024)
    return Status::InvalidArgument("the body limit must be at least 1024 bytes");
  if (options_.service.max_wait.count() < 1)
    return Status::InvalidArgument("max wait must be positive");
  {
    MutexLock lock(stop_mu_);
    if (started_) return Status::FailedPrecondition("the rendezvous server was already started");
    started_ = true;
  }

  service_ = std::make_unique<RendezvousService>(options_.service);
  http_ = std::make_unique<httplib::Server>();
  int threads = options_.http_threads;
  if (threads <= 0) threads = std::clamp(2 * options_.service.policy.max_workers + 16, 32, 256);
  http_->new_task_queue = [threads] {
    return new httplib::ThreadPool(static_cast<size_t>(threads));
  };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(10, 0);
  // Long-polls answer within max_wait; leave room before a write times out.
  http_->set_write_timeout(10, 0);
  InstallErrorHandlers();
  InstallRoutes();

  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
  } else {
    port_ = http_->bind_to_port(options_.host, options_.port) ? options_.port : -1;
  }
  if (port_ <= 0) {
    service_->Shutdown();
    MutexLock lock(stop_mu_);
    stopped_ = true;
    stopped_cv_.notify_all();
    return Status::Unavailable("cannot listen on " + options_.host + ":" +
                               std::to_string(options_.port));
  }
  if (options_.metrics_port >= 0) {
    metrics_ = std::make_unique<metrics::MetricsEndpoint>(
        metrics::EndpointOptions{options_.host, options_.metrics_port, 2},
        [svc = service_.get()] { return svc->Metrics(); });
    if (Status s = metrics_->Start(); !s.ok()) {
      metrics_.reset();
      service_->Shutdown();
      MutexLock lock(stop_mu_);
      stopped_ = true;
      stopped_cv_.notify_all();
      return Status::Unavailable(s.message());
    }
  }
  listener_ = std::thread([this] { http_->listen_after_bind(); });
  // Stop() is only reliable once the accept loop runs; wait (bounded) for it.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!http_->is_running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::Ok();
}

void RendezvousServer::Stop() {
  MutexLock lock(stop_mu_);
  if (stopped_ || !started_) {
    stopped_ = true;
    stopped_cv_.notify_all();
    return;
  }
  service_->Shutdown();
  if (metrics_) metrics_->Stop();
  http_->stop();
  if (listener_.joinable()) listener_.join();
  stopped_ = true;
  stopped_cv_.notify_all();
}

void RendezvousServer::Wait() {
  MutexLock lock(stop_mu_);
  lock.Wait(stopped_cv_, [this]() REQUIRES(stop_mu_) { return stopped_; });
}

void RendezvousServer::InstallErrorHandlers() {
  RendezvousService* svc = service_.get();
  const std::string token = options_.token;
  http_->set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    if (req.path.size() <= kMaxPathLength) return httplib::Server::HandlerResponse::Unhandled;
    Send(res, ErrorReply(414, error_code::kUriTooLong, "the request path is too long"));
    return httplib::Server::HandlerResponse::Handled;
  });
  http_->set_error_handler(httplib::Server::HandlerWithResponse(
      [token](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        Send(res, ErrorFor(req, res.status, Authorized(req, token)));
        return httplib::Server::HandlerResponse::Handled;
      }));
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal server error";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what += std::string(": ") + e.what();
        } catch (...) {
        }
        Send(res, ErrorReply(500, error_code::kInternal, what));
      });
  http_->set_logger([svc](const httplib::Request&, const httplib::Response& res) {
    svc->CountResponse(res.status);
  });
}

// To add an endpoint: write a Reply Handle...(RendezvousService&, const
// httplib::Request&) above and add one line here; route() checks the token
// and the job name (the first path match) before calling it.
void RendezvousServer::InstallRoutes() {
  RendezvousService* svc = service_.get();
  const std::string token = options_.token;
  const std::string job = options_.service.job;
  auto route = [svc, token, job](Reply (*handler)(RendezvousService&, const httplib::Request&)) {
    return [=](const httplib::Request& req, httplib::Response& res) {
      if (!Authorized(req, token)) return Send(res, Unauthenticated());
      if (req.matches.size() > 1 && req.matches[1].str() != job) {
        return Send(res, ErrorReply(404, error_code::kUnknownJob,
                                    "unknown job '" + req.matches[1].str() + "'"));
      }
      Send(res, handler(*svc, req));
    };
  };

  http_->Get("/healthz", [svc](const httplib::Request&, httplib::Response& res) {
    Send(res, Reply{200, {{"status", "ok"}, {"job", svc->job()}}});
  });
  http_->Get("/metrics", [token, svc](const httplib::Request& req, httplib::Response& res) {
    if (!Authorized(req, token)) return Send(res, Unauthenticated());
    res.set_content(svc->Metrics(), metrics::kContentType);
  });
  http_->Get(R"(/v1/jobs/([^/]+))", route(HandleJobStatus));
  // The operator's read-only view of the job (no token: it carries no worker
  // names, addresses or keys, only what `kubectl get hvdjob` shows).
  http_->Get("/v1/status", [svc](const httplib::Request&, httplib::Response& res) {
    const json full = svc->JobStatus().body;
    Send(res, Reply{200,
                    {{"job", full["job"]},
                     {"server_id", full["server_id"]},
                     {"state", full["state"]},
                     {"generation", full["generation"]},
                     {"resets", full["resets"]},
                     {"world_size", full["world"].size()},
                     {"pending", full["pending"].size()}}});
  });
  http_->Post(R"(/v1/jobs/([^/]+)/workers)", route(HandleRegister));
  http_->Post(R"(/v1/jobs/([^/]+)/workers/([^/]+)/(heartbeat|leave|failure|generation))",
              route(HandleWorkerVerb));
  http_->Post(R"(/v1/jobs/([^/]+)/generations/([^/]+)/kv/(set|get|add|wait))", route(HandleKv));
}

}  // namespace khorovod::rendezvous
