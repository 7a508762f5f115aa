// libFuzzer target over the rendezvous server's request handlers.
//
// One in-process RendezvousServer (127.0.0.1, ephemeral port, long-polls
// capped at 5 ms) serves every input. An input is decoded as:
//   byte 0: the endpoint (low 4 bits) and, if bit 7 is set, a wrong token;
//   byte 1: the worker name / generation / kv verb picked for the path;
//   byte 2: the HTTP method (POST mostly, GET, DELETE, PUT);
//   rest:   the request body, sent as application/json.
// The server must answer every request (no lost connection), never with a
// 5xx, and every 4xx must carry a JSON body with an "error" string; anything
// else aborts, which libFuzzer reports as a crash.
//
// Built only with clang (-DKHOROVOD_FUZZ=ON, see tests/runtime/rendezvous/CMakeLists.txt);
// the suite runs it for a bounded number of inputs from a small seed corpus.
#include <httplib.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "http_server.h"

namespace {

using khorovod::rendezvous::RendezvousServer;
using khorovod::rendezvous::ServerOptions;

constexpr const char* kToken = "fuzz-token";

struct Harness {
  std::unique_ptr<RendezvousServer> server;
  std::unique_ptr<httplib::Client> client;
};

Harness* harness = nullptr;

[[noreturn]] void Fail(const std::string& what, const std::string& path, const std::string& body) {
  std::fprintf(stderr, "rendezvous fuzzer: %s\n  path: %s\n  body: %s\n", what.c_str(),
               path.c_str(), body.substr(0, 400).c_str());
  std::abort();
}

std::string PathFor(uint8_t endpoint, uint8_t pick) {
  static const char* names[] = {"w0", "w1", "w2", "w3", "a%20b", "..", "w0%2Fx", ""};
  static const char* verbs[] = {"heartbeat", "leave", "failure", "generation"};
  static const char* kv[] = {"set", "get", "add", "wait"};
  const std::string name = names[pick % 8];
  const std::string job = (pick & 0x80) ? "other-job" : "job1";
  switch (endpoint % 8) {
    case 0:
    case 1:
      return "/v1/jobs/" + job + "/workers";
    case 2:
    case 3:
      return "/v1/jobs/" + job + "/workers/" + name + "/" + verbs[(pick >> 3) % 4];
    case 4:
    case 5:
      return "/v1/jobs/" + job + "/generations/" + std::to_string((pick >> 3) % 3) + "/kv/" +
             kv[(pick >> 5) % 4];
    case 6:
      return "/v1/jobs/" + job;
    default:
      return (pick & 1) ? "/metrics" : "/healthz";
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.token = kToken;
  options.max_body_bytes = 64 << 10;
  options.service.job = "job1";
  options.service.log = false;
  options.service.max_wait = std::chrono::milliseconds(5);
  options.service.policy.min_workers = 1;
  options.service.policy.max_workers = 4;
  harness = new Harness;
  harness->server = std::make_unique<RendezvousServer>(options);
  if (khorovod::Status s = harness->server->Start(); !s.ok()) {
    std::fprintf(stderr, "rendezvous fuzzer: cannot start the server: %s\n", s.message().c_str());
    std::abort();
  }
  harness->client = std::make_unique<httplib::Client>("127.0.0.1", harness->server->port());
  // A connection per request: with keep-alive every answer took about 40 ms
  // here (37 inputs/s against 750), the signature of Nagle's algorithm on
  // the server's writes meeting delayed ACKs.
  harness->client->set_keep_alive(false);
  harness->client->set_tcp_nodelay(true);
  harness->client->set_read_timeout(10, 0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const std::string path = PathFor(data[0] & 0x0f, data[1]);
  const bool bad_token = (data[0] & 0x80) != 0;
  const std::string body(reinterpret_cast<const char*>(data) + 3, size - 3);
  httplib::Headers headers{
      {"Authorization", std::string("Bearer ") + (bad_token ? "wrong" : kToken)}};
  auto send = [&]() -> httplib::Result {
    switch (data[2] % 8) {
      case 0:
        return harness->client->Get(path, headers);
      case 1:
        return harness->client->Delete(path, headers, body, "application/json");
      case 2:
        return harness->client->Put(path, headers, body, "application/json");
      default:
        return harness->client->Post(path, headers, body, "application/json");
    }
  };
  const httplib::Result res = send();
  if (!res) Fail("no answer (" + httplib::to_string(res.error()) + ")", path, body);
  if (res->status >= 500 && res->status != 507) {  // 507: the KV store is full
    Fail("status " + std::to_string(res->status), path, body);
  }
  if (res->status >= 400) {
    const auto parsed = nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_object() || !parsed.contains("error") || !parsed["error"].is_string()) {
      Fail("error " + std::to_string(res->status) + " without a JSON error body: " + res->body,
           path, body);
    }
  }
  return 0;
}
