// Fuzz-style robustness test: a few thousand random and mutated requests
// (and raw garbage bytes) from four threads at once. Every HTTP answer must be
// a non-500 status with a JSON error body when it is an error, and the server
// must still answer /healthz and serve a normal registration afterwards.
#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "test_server.h"

namespace khorovod::rendezvous {
namespace {

using testing::Send;

class Fuzzer {
 public:
  explicit Fuzzer(uint64_t seed) : rng_(seed) {}

  size_t Pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  bool Chance(int percent) { return static_cast<int>(Pick(100)) < percent; }

  std::string Int() {
    static const char* special[] = {"0",
                                    "-1",
                                    "1",
                                    "7",
                                    "18446744073709551615",
                                    "-9223372036854775808",
                                    "9223372036854775807",
                                    "1e999",
                                    "0.5",
                                    "\"3\"",
                                    "null",
                                    "true",
                                    "[]"};
    if (Chance(25)) return special[Pick(std::size(special))];
    return std::to_string(static_cast<int64_t>(Pick(12)) - 1);
  }
  std::string Name() {
    static const char* names[] = {"w0",  "w1", "w2", "w3",   "w4",      "w5",
                                  "a b", "",   "..", "w0/x", "\\u0000", "w\\u00e9"};
    return names[Chance(85) ? Pick(6) : Pick(std::size(names))];
  }
  std::string Str() {
    if (Chance(70)) return "\"" + Name() + "\"";
    return Int();
  }

  // A request aimed at one endpoint: mostly its own kind of body, sometimes
  // another endpoint's, then byte-level mutations of both.
  struct Request {
    std::string method, path, body;
  };
  Request Next() {
    static const char* verbs[] = {"heartbeat",  "leave",      "failure",
                                  "generation", "generation", "nope"};
    static const char* kv[] = {"set", "get", "add", "wait", "del"};
    std::string job = Chance(95) ? "job1" : (Chance(50) ? "job2" : "");
    Request r;
    r.method = Chance(90) ? "POST" : (Chance(50) ? "GET" : "DELETE");
    int kind = static_cast<int>(Pick(8));
    switch (kind) {
      case 0:
      case 1:
        r.path = "/v1/jobs/" + job + "/workers";
        break;
      case 2:
      case 3: {
        std::string verb = verbs[Pick(std::size(verbs))];
        r.path = "/v1/jobs/" + job + "/workers/" + Name() + "/" + verb;
        kind = verb == "generation" ? 1 : 5;
        break;
      }
      case 4:
      case 5: {
        std::string op = kv[Pick(std::size(kv))];
        r.path = "/v1/jobs/" + job + "/generations/" + std::to_string(Pick(3)) + "/kv/" + op;
        kind = op == "set" ? 2 : op == "wait" ? 4 : 3;
        break;
      }
      case 6:
        r.path = "/v1/jobs/" + job;
        r.method = "GET";
        break;
      default:
        r.path = Chance(50) ? "/metrics" : "/healthz";
        r.method = "GET";
        break;
    }
    r.path = Mutate(r.path, 5, "/%.a-_?#");
    r.body = Mutate(Body(Chance(80) ? kind : static_cast<int>(Pick(8))), 25,
                    "{}[]\":,\\0123456789-e.tn \xff\x80");
    return r;
  }

  std::string Body(int kind) {
    switch (kind) {
      case 0:
        return "{\"name\":" + Str() + ",\"address\":" + Str() + ",\"slots\":" + Int() + "}";
      case 1:
        return "{\"after\":" + Int() + ",\"timeout_ms\":" + Int() + "}";
      case 2:
        return "{\"key\":" + Str() + ",\"value\":" + (Chance(70) ? "\"YWJj\"" : Str()) + "}";
      case 3:
        return "{\"key\":" + Str() + ",\"delta\":" + Int() + ",\"timeout_ms\":" + Int() + "}";
      case 4:
        return "{\"keys\":[" + Str() + "," + Str() + "],\"timeout_ms\":" + Int() + "}";
      case 5:
        return Chance(50) ? "" : "{\"reason\":" + Str() + "}";
      case 6:
        return "";
      default: {
        std::string b;
        size_t n = Pick(300);
        for (size_t i = 0; i < n; ++i) b += static_cast<char>(Pick(256));
        return b;
      }
    }
  }

  // With probability `percent`, applies a few byte-level edits.
  std::string Mutate(std::string s, int percent, const std::string& alphabet) {
    if (!Chance(percent)) return s;
    int edits = 1 + static_cast<int>(Pick(3));
    for (int e = 0; e < edits; ++e) {
      size_t pos = s.empty() ? 0 : Pick(s.size() + 1);
      char c = alphabet[Pick(alphabet.size())];
      switch (Pick(4)) {
        case 0:
          s.insert(pos, 1, c);
          break;
        case 1:
          if (pos < s.size()) s[pos] = c;
          break;
        case 2:
          s = s.substr(0, pos);
          break;
        default:
          s.insert(pos, s.substr(0, std::min<size_t>(s.size(), 40)));
          break;
      }
    }
    return s;
  }

  std::string RawRequest() {
    static const char* starts[] = {"GET /healthz HTTP/1.1\r\n",
                                   "POST /v1/jobs/job1/workers HTTP/1.1\r\n",
                                   "BREW /pot HTTP/1.1\r\n",
                                   "GET  HTTP/1.1\r\n",
                                   "\r\n\r\n",
                                   ""};
    std::string r = starts[Pick(std::size(starts))];
    if (Chance(50)) r += "Content-Length: " + Int() + "\r\n";
    if (Chance(30)) r += "Transfer-Encoding: chunked\r\n";
    if (Chance(20)) r += "X-Long: " + std::string(Pick(20000), 'x') + "\r\n";
    r += "Authorization: Bearer s3cret-token\r\n\r\n";
    if (Chance(50)) r += Body(static_cast<int>(Pick(8)));
    return Mutate(r, 40, "\r\n :/\x00\xff");
  }

 private:
  std::mt19937_64 rng_;
};

TEST(HttpFuzz, RandomAndMutatedRequestsNeverBreakTheServer) {
  ServerOptions options = testing::DefaultOptions();
  options.max_body_bytes = 16 * 1024;
  options.service.max_wait = std::chrono::milliseconds(30);
  options.service.policy.settle = std::chrono::milliseconds(10);
  options.service.policy.heartbeat_timeout = std::chrono::milliseconds(2000);
  testing::TestServer server(options);
  const int port = server.port();

  constexpr int kThreads = 4;
  constexpr int kRequestsPerThread = 750;
  constexpr int kRawPerThread = 60;
  std::atomic<int> answered{0};
  std::mutex hist_mu;
  std::map<int, int> histogram;  // status -> count, printed for the record
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Fuzzer f(0x5eed0000u + static_cast<uint64_t>(t));
      for (int i = 0; i < kRequestsPerThread; ++i) {
        Fuzzer::Request q = f.Next();
        const std::string& method = q.method;
        const std::string& path = q.path;
        const std::string& body = q.body;
        std::optional<std::string> token = std::string(testing::kToken);
        if (f.Chance(10))
          token = std::nullopt;
        else if (f.Chance(10))
          token = "wrong";
        testing::RawReply r = Send(port, method, path, body, token);
        if (!r.transport_ok) continue;  // the client refused to send it (e.g. a bad path)
        ++answered;
        {
          std::lock_guard<std::mutex> lock(hist_mu);
          ++histogram[r.status];
        }
        EXPECT_GE(r.status, 200) << method << " " << path;
        EXPECT_LT(r.status, 600) << method << " " << path;
        EXPECT_NE(r.status, 500) << method << " " << path << " " << body << " -> " << r.text;
        if (r.status >= 400) {
          EXPECT_TRUE(r.body.is_object() && r.body.contains("error") && r.body["error"].is_string())
              << method << " " << path << " -> " << r.status << " " << r.text;
        }
      }
      for (int i = 0; i < kRawPerThread; ++i)
        testing::SendRawBytes(port, f.RawRequest(), std::chrono::seconds(15));
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_GT(answered.load(), kThreads * kRequestsPerThread * 9 / 10);
  std::string summary;
  for (const auto& [status, n] : histogram)
    summary += " " + std::to_string(status) + ":" + std::to_string(n);
  std::cout << "fuzz answers by status:" << summary << "\n";
  EXPECT_GE(histogram.size(), 6u) << "the fuzzer should reach many different answers";

  auto health = Send(port, "GET", "/healthz", "", std::nullopt);
  ASSERT_EQ(health.status, 200);
  EXPECT_EQ(health.body["status"], "ok");
  auto reg =
      Send(port, "POST", "/v1/jobs/job1/workers", R"({"name":"final","address":"h","slots":8})");
  EXPECT_TRUE(reg.status == 200 || reg.status == 409)
      << reg.text;  // 409: the fuzz may have failed the job
}

}  // namespace
}  // namespace khorovod::rendezvous
