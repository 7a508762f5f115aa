// JsonHttpClient: the transport under HttpStore and RendezvousClient. It
// sends one JSON request to the rendezvous server with the job's bearer
// token and returns the status and parsed JSON body of the answer.
//
// Retries: a request that never reached the server (connection refused or
// timed out, as while the server restarts) is retried with exponential
// backoff, at most RetryPolicy::max_attempts times. A request that may have
// been processed (a read or write failure, or a 503 from a server shutting
// down) is retried only when the caller marks it idempotent. Every call is
// bounded: connect timeout 2 s, read timeout = the server-side wait + 10 s.
//
// Errors: transport failures after the retries are kUnavailable; an HTTP
// error answer is returned as a JsonReply for the caller to interpret
// (ToStatus() gives the usual mapping).
//
// Thread-safety: all methods are const and thread-safe; every call uses its
// own connection ("Connection: close"), so no server thread is held idle.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "khorovod/status.h"

namespace khorovod::rendezvous {

struct HttpEndpoint {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string token;
};

struct RetryPolicy {
  int max_attempts = 10;
  std::chrono::milliseconds initial_backoff{50};
  std::chrono::milliseconds max_backoff{2000};
};

struct JsonReply {
  int status = 0;
  nlohmann::json body = nlohmann::json::object();  // {} when the body was not a JSON object

  bool ok() const { return status >= 200 && status < 300; }
  // body["code"] / body["error"], or "" when absent.
  std::string code() const;
  std::string error() const;
};

class JsonHttpClient {
 public:
  JsonHttpClient(HttpEndpoint endpoint, RetryPolicy retry);

  // POSTs `body` to `path`. `server_wait` is how long the server may hold
  // the request before answering (a long-poll's timeout).
  StatusOr<JsonReply> Post(const std::string& path, const nlohmann::json& body,
                           std::chrono::milliseconds server_wait, bool idempotent) const;
  StatusOr<JsonReply> Get(const std::string& path) const;

  // Maps an error answer to a Status whose message names the request, the
  // HTTP status, the server's code and text: 400 -> kInvalidArgument;
  // 429 and 5xx -> kUnavailable; other 4xx -> kFailedPrecondition.
  static Status ToStatus(const std::string& what, const JsonReply& reply);

  const HttpEndpoint& endpoint() const { return endpoint_; }

 private:
  StatusOr<JsonReply> Send(const std::string& method, const std::string& path,
                           const std::string& body, std::chrono::milliseconds server_wait,
                           bool idempotent) const;

  HttpEndpoint endpoint_;
  RetryPolicy retry_;
};

}  // namespace khorovod::rendezvous
