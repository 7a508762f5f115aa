#include "http_json_client.h"

#include <httplib.h>

#include <algorithm>
#include <thread>

#include "protocol.h"

namespace khorovod::rendezvous {

using nlohmann::json;
using std::chrono::milliseconds;

std::string JsonReply::code() const {
  auto it = body.find("code");
  return it != body.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string JsonReply::error() const {
  auto it = body.find("error");
  return it != body.end() && it->is_string() ? it->get<std::string>() : "";
}

JsonHttpClient::JsonHttpClient(HttpEndpoint endpoint, RetryPolicy retry)
    : endpoint_(std::move(endpoint)), retry_(retry) {}

StatusOr<JsonReply> JsonHttpClient::Post(const std::string& path, const json& body,
                                         milliseconds server_wait, bool idempotent) const {
  return Send("POST", path, body.dump(), server_wait, idempotent);
}

StatusOr<JsonReply> JsonHttpClient::Get(const std::string& path) const {
  return Send("GET", path, "", milliseconds(0), /*idempotent=*/true);
}

StatusOr<JsonReply> JsonHttpClient::Send(const std::string& method, const std::string& path,
                                         const std::string& body, milliseconds server_wait,
                                         bool idempotent) const {
  const std::string what = "rendezvous " + method + " " + path;
  milliseconds backoff = retry_.initial_backoff;
  std::string last_error;
  int attempts = std::max(1, retry_.max_attempts);
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    if (attempt > 1) {
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, retry_.max_backoff);
    }
    httplib::Client cli(endpoint_.host, endpoint_.port);
    cli.set_connection_timeout(std::chrono::seconds(2));
    cli.set_read_timeout(server_wait + std::chrono::seconds(10));
    cli.set_write_timeout(std::chrono::seconds(10));
    cli.set_keep_alive(false);
    cli.set_decompress(false);
    if (!endpoint_.token.empty()) cli.set_bearer_token_auth(endpoint_.token);
    httplib::Result res = method == "GET" ? cli.Get(path) : cli.Post(path, body, kJsonContentType);
    if (!res) {
      httplib::Error e = res.error();
      last_error = httplib::to_string(e);
      bool unsent = e == httplib::Error::Connection || e == httplib::Error::ConnectionTimeout;
      if (unsent || idempotent) continue;
      return Status::Unavailable(what + ": " + last_error +
                                 " (not retried: the request may have been processed)");
    }
    JsonReply reply;
    reply.status = res->status;
    json parsed = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) {
      reply.body = std::move(parsed);
    } else if (!reply.ok()) {
      reply.body = {{"error", res->body.substr(0, 200)}};
    }
    if (reply.status == 503 && idempotent && attempt < attempts) {
      last_error = "HTTP 503 " + reply.error();
      continue;
    }
    return reply;
  }
  return Status::Unavailable(what + ": cannot reach " + endpoint_.host + ":" +
                             std::to_string(endpoint_.port) + " after " + std::to_string(attempts) +
                             " attempts: " + last_error);
}

Status JsonHttpClient::ToStatus(const std::string& what, const JsonReply& reply) {
  if (reply.ok()) return Status::Ok();
  std::string message = what + ": HTTP " + std::to_string(reply.status);
  // Appends only: GCC 12's -Wrestrict misfires on `" " + std::string&&` in
  // Release builds, and command 1 must build without warnings.
  if (!reply.code().empty()) {
    message += ' ';
    message += reply.code();
  }
  message += ": ";
  message += reply.error().empty() ? std::string("(no error text)") : reply.error();
  if (reply.status == 400) return Status::InvalidArgument(message);
  if (reply.status == 429 || reply.status >= 500) return Status::Unavailable(message);
  return Status::FailedPrecondition(message);
}

}  // namespace khorovod::rendezvous
