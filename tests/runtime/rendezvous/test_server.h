// Helpers for the HTTP-level rendezvous tests: an in-process server on an
// ephemeral 127.0.0.1 port, a raw request helper, and a deadline poll.
#pragma once

#include <httplib.h>

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "http_json_client.h"
#include "http_server.h"

namespace khorovod::rendezvous::testing {

inline constexpr const char* kToken = "s3cret-token";
inline constexpr const char* kJob = "job1";

// min 1, max 8, settle 50 ms, long-poll cap 5 s, quiet.
ServerOptions DefaultOptions();

class TestServer {
 public:
  explicit TestServer(ServerOptions options = DefaultOptions());
  ~TestServer();

  int port() const { return server_->port(); }
  HttpEndpoint endpoint(const std::string& token = kToken) const;
  RendezvousServer& server() { return *server_; }
  // Stops the server and starts a fresh one (no state) on the same port.
  void Restart();
  void Stop();

 private:
  void Start();
  ServerOptions options_;
  std::unique_ptr<RendezvousServer> server_;
};

struct RawReply {
  bool transport_ok = false;
  int status = 0;
  std::string text;
  nlohmann::json body;  // discarded when the text is not JSON
  std::string content_type;
  std::string retry_after;
};

// One HTTP request; `token` nullopt sends no Authorization header.
RawReply Send(int port, const std::string& method, const std::string& path,
              const std::string& body = "",
              const std::optional<std::string>& token = std::string(kToken));

// Writes `bytes` to a fresh connection and returns everything read until the
// server closes it or `timeout` passes.
std::string SendRawBytes(int port, const std::string& bytes, std::chrono::milliseconds timeout);

// Polls `pred` every millisecond until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

}  // namespace khorovod::rendezvous::testing
