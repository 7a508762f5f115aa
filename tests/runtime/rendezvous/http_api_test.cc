// The HTTP API against a real in-process server: bad inputs (table-driven),
// the failed-job state on every endpoint, blacklisting, long-poll bounds,
// /healthz and the Prometheus exposition.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "khorovod/util/base64.h"
#include "test_server.h"

namespace khorovod::rendezvous {
namespace {

using testing::kToken;
using testing::Send;
using testing::TestServer;

const std::string kWorkers = "/v1/jobs/job1/workers";
const std::string kW0 = "/v1/jobs/job1/workers/w0";
const std::string kKv0 = "/v1/jobs/job1/generations/0/kv";

void ExpectJsonError(const testing::RawReply& r, int status, const std::string& code,
                     const std::string& what) {
  ASSERT_TRUE(r.transport_ok) << what;
  EXPECT_EQ(r.status, status) << what << ": " << r.text;
  ASSERT_TRUE(r.body.is_object()) << what
                                  << ": body is not a JSON object: " << r.text.substr(0, 200);
  ASSERT_TRUE(r.body.contains("error") && r.body["error"].is_string()) << what << ": " << r.text;
  EXPECT_FALSE(r.body["error"].get<std::string>().empty()) << what;
  ASSERT_TRUE(r.body.contains("code") && r.body["code"].is_string()) << what << ": " << r.text;
  EXPECT_EQ(r.body["code"].get<std::string>(), code) << what << ": " << r.text;
  EXPECT_EQ(r.content_type, "application/json") << what;
}

TEST(HttpApi, BadInputsGetTheRightStatusAndAJsonError) {
  ServerOptions options = testing::DefaultOptions();
  options.max_body_bytes = 64 * 1024;
  TestServer server(options);
  int port = server.port();
  ASSERT_EQ(Send(port, "POST", kWorkers, R"({"name":"w0","address":"127.0.0.1","slots":1})").status,
            200);
  ASSERT_EQ(Send(port, "POST", kKv0 + "/set", R"({"key":"s","value":"YWJj"})").status, 200);

  const std::string good_register = R"({"name":"w1","address":"127.0.0.1","slots":1})";
  std::optional<std::string> none;
  struct Case {
    const char* what;
    std::string method, path, body;
    std::optional<std::string> token;
    int status;
    const char* code;
  } cases[] = {
      {"no token", "POST", kWorkers, good_register, none, 401, "unauthenticated"},
      {"wrong token", "POST", kWorkers, good_register, std::string("nope"), 401, "unauthenticated"},
      {"token prefix", "POST", kWorkers, good_register, std::string("s3cret"), 401,
       "unauthenticated"},
      {"token plus suffix", "POST", kWorkers, good_register, std::string(kToken) + "x", 401,
       "unauthenticated"},
      {"empty token", "POST", kWorkers, good_register, std::string(""), 401, "unauthenticated"},
      {"no token, metrics", "GET", "/metrics", "", none, 401, "unauthenticated"},
      {"no token, job status", "GET", "/v1/jobs/job1", "", none, 401, "unauthenticated"},
      {"no token, unknown path", "GET", "/v1/secret", "", none, 401, "unauthenticated"},
      {"malformed JSON", "POST", kWorkers, R"({"name":"w1",)", kToken, 400, "invalid_argument"},
      {"JSON array body", "POST", kWorkers, "[]", kToken, 400, "invalid_argument"},
      {"JSON null body", "POST", kWorkers, "null", kToken, 400, "invalid_argument"},
      {"invalid UTF-8", "POST", kWorkers, "{\"name\":\"\xff\xfe\",\"address\":\"a\",\"slots\":1}",
       kToken, 400, "invalid_argument"},
      {"unknown field", "POST", kWorkers, R"({"name":"w1","address":"a","slots":1,"rank":0})",
       kToken, 400, "invalid_argument"},
      {"missing field", "POST", kWorkers, R"({"name":"w1","slots":1})", kToken, 400,
       "invalid_argument"},
      {"name not a string", "POST", kWorkers, R"({"name":7,"address":"a","slots":1})", kToken, 400,
       "invalid_argument"},
      {"slots as string", "POST", kWorkers, R"({"name":"w1","address":"a","slots":"1"})", kToken,
       400, "invalid_argument"},
      {"slots as float", "POST", kWorkers, R"({"name":"w1","address":"a","slots":1.5})", kToken,
       400, "invalid_argument"},
      {"slots zero", "POST", kWorkers, R"({"name":"w1","address":"a","slots":0})", kToken, 400,
       "invalid_argument"},
      {"slots huge", "POST", kWorkers, R"({"name":"w1","address":"a","slots":1e300})", kToken, 400,
       "invalid_argument"},
      {"bad worker name", "POST", kWorkers, R"({"name":"a b","address":"a","slots":1})", kToken,
       400, "invalid_argument"},
      {"oversized body", "POST", kWorkers, std::string(200 * 1024, ' '), kToken, 413,
       "payload_too_large"},
      {"unknown job", "POST", "/v1/jobs/other/workers", good_register, kToken, 404, "unknown_job"},
      {"unknown job status", "GET", "/v1/jobs/other", "", kToken, 404, "unknown_job"},
      {"unknown worker heartbeat", "POST", "/v1/jobs/job1/workers/ghost/heartbeat", "", kToken, 404,
       "unknown_worker"},
      {"unknown worker generation", "POST", "/v1/jobs/job1/workers/ghost/generation",
       R"({"after":0})", kToken, 404, "unknown_worker"},
      {"unknown worker leave", "POST", "/v1/jobs/job1/workers/ghost/leave", "{}", kToken, 404,
       "unknown_worker"},
      {"invalid worker name in path", "POST", "/v1/jobs/job1/workers/%2E%2E/heartbeat", "", kToken,
       400, "invalid_argument"},
      {"unknown endpoint", "GET", "/v2/anything", "", kToken, 404, "not_found"},
      {"wrong method", "GET", kWorkers, "", kToken, 404, "not_found"},
      {"heartbeat with a field", "POST", kW0 + "/heartbeat", R"({"alive":true})", kToken, 400,
       "invalid_argument"},
      {"generation from the future", "POST", kW0 + "/generation", R"({"after":5})", kToken, 409,
       "bad_generation"},
      {"negative after", "POST", kW0 + "/generation", R"({"after":-1})", kToken, 400,
       "invalid_argument"},
      {"negative long-poll timeout", "POST", kW0 + "/generation", R"({"after":0,"timeout_ms":-5})",
       kToken, 400, "invalid_argument"},
      {"missing after", "POST", kW0 + "/generation", R"({"timeout_ms":5})", kToken, 400,
       "invalid_argument"},
      {"reason not a string", "POST", kW0 + "/failure", R"({"reason":["x"]})", kToken, 400,
       "invalid_argument"},
      {"non-numeric generation", "POST", "/v1/jobs/job1/generations/abc/kv/get", R"({"key":"k"})",
       kToken, 400, "invalid_argument"},
      {"negative generation", "POST", "/v1/jobs/job1/generations/-1/kv/get", R"({"key":"k"})",
       kToken, 400, "invalid_argument"},
      {"generation overflow", "POST", "/v1/jobs/job1/generations/99999999999999999999/kv/get",
       R"({"key":"k"})", kToken, 400, "invalid_argument"},
      {"unformed generation", "POST", "/v1/jobs/job1/generations/7/kv/get", R"({"key":"k"})",
       kToken, 404, "unknown_generation"},
      {"negative get timeout", "POST", kKv0 + "/get", R"({"key":"k","timeout_ms":-1})", kToken, 400,
       "invalid_argument"},
      {"negative wait timeout", "POST", kKv0 + "/wait", R"({"keys":["k"],"timeout_ms":-1})", kToken,
       400, "invalid_argument"},
      {"wait keys not strings", "POST", kKv0 + "/wait", R"({"keys":[1,2]})", kToken, 400,
       "invalid_argument"},
      {"set value not base64", "POST", kKv0 + "/set", R"({"key":"k","value":"***"})", kToken, 400,
       "invalid_argument"},
      {"set empty key", "POST", kKv0 + "/set", R"({"key":"","value":""})", kToken, 400,
       "invalid_argument"},
      {"add non-integer delta", "POST", kKv0 + "/add", R"({"key":"n","delta":"1"})", kToken, 400,
       "invalid_argument"},
      {"add to a non-counter", "POST", kKv0 + "/add", R"({"key":"s","delta":1})", kToken, 409,
       "not_an_integer"},
      {"missing key", "POST", kKv0 + "/get", R"({"key":"absent"})", kToken, 404, "key_not_found"},
      {"deeply nested JSON", "POST", kWorkers, std::string(20000, '[') + std::string(20000, ']'),
       kToken, 400, "invalid_argument"},
      {"path too long", "GET", "/v1/jobs/" + std::string(3000, 'j'), "", kToken, 414,
       "uri_too_long"},
  };
  for (const Case& c : cases) {
    testing::RawReply r = Send(port, c.method, c.path, c.body, c.token);
    ExpectJsonError(r, c.status, c.code, c.what);
  }
  // After all that, the server still works and w0 is still known.
  EXPECT_EQ(Send(port, "POST", kW0 + "/heartbeat", "").status, 200);
  EXPECT_EQ(Send(port, "GET", "/healthz", "", std::nullopt).status, 200);
}

TEST(HttpApi, HappyPathBodies) {
  TestServer server;
  int port = server.port();
  auto reg = Send(port, "POST", kWorkers, R"({"name":"w0","address":"127.0.0.1","slots":1})");
  ASSERT_EQ(reg.status, 200) << reg.text;
  EXPECT_EQ(reg.body["state"], "pending");
  EXPECT_EQ(reg.body["generation"], 0);
  EXPECT_TRUE(reg.body["heartbeat_interval_ms"].is_number_integer());
  auto gen = Send(port, "POST", kW0 + "/generation", R"({"after":0,"timeout_ms":5000})");
  ASSERT_EQ(gen.status, 200) << gen.text;
  ASSERT_EQ(gen.body["ready"], true) << gen.text;
  EXPECT_EQ(gen.body["generation"], 1);
  EXPECT_EQ(gen.body["rank"], 0);
  EXPECT_EQ(gen.body["size"], 1);
  EXPECT_EQ(gen.body["world"][0]["name"], "w0");
  auto hb = Send(port, "POST", kW0 + "/heartbeat", "{}");
  ASSERT_EQ(hb.status, 200);
  EXPECT_EQ(hb.body["state"], "active");
  EXPECT_EQ(hb.body["membership_changed"], false);
  EXPECT_EQ(hb.body["reforming"], false);
  EXPECT_EQ(hb.body["job_failed"], false);
  auto status = Send(port, "GET", "/v1/jobs/job1");
  ASSERT_EQ(status.status, 200);
  EXPECT_EQ(status.body["state"], "running");
  EXPECT_EQ(status.body["generation"], 1);

  const std::string kv1 = "/v1/jobs/job1/generations/1/kv";
  EXPECT_EQ(
      Send(port, "POST", kv1 + "/set", R"({"key":"k","value":")" + Base64Encode("v\x01") + "\"}")
          .status,
      200);
  auto get = Send(port, "POST", kv1 + "/get", R"({"key":"k"})");
  ASSERT_EQ(get.status, 200);
  EXPECT_EQ(Base64Decode(get.body["value"].get<std::string>()).value(), "v\x01");
  auto add = Send(port, "POST", kv1 + "/add", R"({"key":"n","delta":5})");
  EXPECT_EQ(add.body["value"], 5);
  auto wait = Send(port, "POST", kv1 + "/wait", R"({"keys":["k","n","x"],"timeout_ms":10})");
  EXPECT_EQ(wait.body["ready"], false);
  EXPECT_EQ(wait.body["missing"], nlohmann::json::array({"x"}));

  // Asking for the generation after 1 declares w0 ready; alone and above
  // min, it forms generation 2 after the settle window.
  auto next = Send(port, "POST", kW0 + "/generation", R"({"after":1,"timeout_ms":5000})");
  EXPECT_EQ(next.body["generation"], 2) << next.text;
  EXPECT_EQ(Send(port, "POST", kW0 + "/leave", R"({"reason":"done"})").status, 200);
}

TEST(HttpApi, StatusEndpointNeedsNoTokenAndShowsOnlyCounts) {
  TestServer server;
  int port = server.port();
  auto before = Send(port, "GET", "/v1/status", "", std::nullopt);
  ASSERT_EQ(before.status, 200) << before.text;
  EXPECT_EQ(before.body["job"], "job1");
  EXPECT_EQ(before.body["generation"], 0);
  EXPECT_EQ(before.body["world_size"], 0);
  ASSERT_EQ(Send(port, "POST", kWorkers, R"({"name":"w0","address":"10.0.0.7","slots":1})").status,
            200);
  ASSERT_EQ(
      Send(port, "POST", kW0 + "/generation", R"({"after":0,"timeout_ms":5000})").body["ready"],
      true);
  ASSERT_EQ(Send(port, "POST", kWorkers, R"({"name":"w1","address":"10.0.0.8","slots":1})").status,
            200);
  auto after = Send(port, "GET", "/v1/status", "", std::nullopt);
  ASSERT_EQ(after.status, 200) << after.text;
  EXPECT_EQ(after.content_type, "application/json");
  EXPECT_EQ(after.body["state"], "running");
  EXPECT_EQ(after.body["generation"], 1);
  EXPECT_EQ(after.body["world_size"], 1);
  EXPECT_EQ(after.body["pending"], 1);
  EXPECT_TRUE(after.body["server_id"].is_string());
  EXPECT_EQ(after.text.find("10.0.0."), std::string::npos)
      << "no addresses without a token: " << after.text;
  EXPECT_EQ(after.text.find("w0"), std::string::npos)
      << "no worker names without a token: " << after.text;
}

TEST(HttpApi, LongPollsAreCappedByTheServer) {
  ServerOptions options = testing::DefaultOptions();
  options.service.max_wait = std::chrono::milliseconds(200);
  options.service.policy.min_workers = 2;
  TestServer server(options);
  ASSERT_EQ(
      Send(server.port(), "POST", kWorkers, R"({"name":"w0","address":"h","slots":1})").status,
      200);
  auto start = std::chrono::steady_clock::now();
  auto r = Send(server.port(), "POST", kW0 + "/generation",
                R"({"after":0,"timeout_ms":9223372036854775807})");
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body["ready"], false);
  auto g = Send(server.port(), "POST", kKv0 + "/get", R"({"key":"never","timeout_ms":100000000})");
  EXPECT_EQ(g.status, 404);
}

TEST(HttpApi, AFailedJobIsReportedByEveryEndpoint) {
  ServerOptions options = testing::DefaultOptions();
  options.service.policy.min_workers = 2;
  options.service.policy.elastic_timeout = std::chrono::milliseconds(200);
  TestServer server(options);
  int port = server.port();
  ASSERT_EQ(Send(port, "POST", kWorkers, R"({"name":"w0","address":"h","slots":1})").status, 200);
  ASSERT_TRUE(
      testing::WaitFor([&] { return Send(port, "GET", "/v1/jobs/job1").body["state"] == "failed"; },
                       std::chrono::seconds(20)));
  struct Req {
    std::string path, body;
  } reqs[] = {
      {kWorkers, R"({"name":"w9","address":"h","slots":1})"},
      {kW0 + "/heartbeat", ""},
      {kW0 + "/generation", R"({"after":0,"timeout_ms":1000})"},
      {kW0 + "/leave", ""},
      {kW0 + "/failure", R"({"reason":"x"})"},
      {"/v1/jobs/job1/workers/ghost/heartbeat", ""},
      {kKv0 + "/set", R"({"key":"k","value":""})"},
      {kKv0 + "/get", R"({"key":"k"})"},
      {kKv0 + "/add", R"({"key":"k","delta":1})"},
      {kKv0 + "/wait", R"({"keys":["k"]})"},
  };
  for (const Req& q : reqs) {
    auto r = Send(port, "POST", q.path, q.body);
    ExpectJsonError(r, 409, "job_failed", q.path);
    EXPECT_NE(r.body["error"].get<std::string>().find("elastic timeout"), std::string::npos)
        << r.text;
  }
  auto status = Send(port, "GET", "/v1/jobs/job1");
  EXPECT_EQ(status.status, 200);
  EXPECT_NE(status.body["failure_reason"].get<std::string>().find("elastic timeout"),
            std::string::npos);
  EXPECT_EQ(Send(port, "GET", "/healthz", "", std::nullopt).status, 200);
  EXPECT_NE(Send(port, "GET", "/metrics").text.find("khorovod_rendezvous_job_failed 1\n"),
            std::string::npos);
}

TEST(HttpApi, BlacklistedWorkersGet429WithRetryAfter) {
  ServerOptions options = testing::DefaultOptions();
  options.service.policy.blacklist_threshold = 1;
  options.service.policy.blacklist_base = std::chrono::milliseconds(60'000);
  options.service.policy.blacklist_max = std::chrono::milliseconds(60'000);
  TestServer server(options);
  const std::string body = R"({"name":"w0","address":"h","slots":1})";
  ASSERT_EQ(Send(server.port(), "POST", kWorkers, body).status, 200);
  ASSERT_EQ(Send(server.port(), "POST", kW0 + "/failure", R"({"reason":"crash"})").status, 200);
  auto r = Send(server.port(), "POST", kWorkers, body);
  ExpectJsonError(r, 429, "blacklisted", "blacklisted register");
  EXPECT_EQ(r.retry_after, "60");
  EXPECT_GT(r.body["retry_after_ms"].get<int64_t>(), 59'000);
}

// A minimal Prometheus text-format (0.0.4) checker: every sample belongs to a
// family announced by HELP and TYPE lines; names and values are well formed.
std::map<std::string, std::string> ParsePrometheus(const std::string& text) {
  static const std::regex help(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .*)");
  static const std::regex type(
      R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|untyped|summary|histogram))");
  static const std::regex sample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (\S+))");
  std::map<std::string, std::string> types;
  std::set<std::string> helped;
  std::istringstream in(text);
  std::string line;
  EXPECT_TRUE(text.empty() || text.back() == '\n');
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, help)) {
      EXPECT_TRUE(helped.insert(m[1]).second) << "duplicate HELP: " << line;
    } else if (std::regex_match(line, m, type)) {
      EXPECT_TRUE(helped.count(m[1])) << "TYPE before HELP: " << line;
      EXPECT_TRUE(types.emplace(m[1], m[2]).second) << "duplicate TYPE: " << line;
    } else if (std::regex_match(line, m, sample)) {
      std::string family = m[1];
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        const std::string sfx = suffix;
        if (!types.count(family) && family.size() > sfx.size() &&
            family.compare(family.size() - sfx.size(), sfx.size(), sfx) == 0 &&
            types[family.substr(0, family.size() - sfx.size())] == "histogram") {
          family = family.substr(0, family.size() - sfx.size());
        }
      }
      EXPECT_TRUE(types.count(family)) << "sample without TYPE: " << line;
      std::string v = m[5];
      if (v != "NaN" && v != "+Inf" && v != "-Inf") {
        size_t used = 0;
        EXPECT_NO_THROW((void)std::stod(v, &used)) << line;
        EXPECT_EQ(used, v.size()) << line;
      }
    } else {
      ADD_FAILURE() << "not a Prometheus line: '" << line << "'";
    }
  }
  return types;
}

TEST(HttpApi, MetricsAreValidPrometheusText) {
  TestServer server;
  int port = server.port();
  ASSERT_EQ(Send(port, "POST", kWorkers, R"({"name":"w0","address":"h","slots":1})").status, 200);
  ASSERT_EQ(
      Send(port, "POST", kW0 + "/generation", R"({"after":0,"timeout_ms":5000})").body["ready"],
      true);
  auto r = Send(port, "GET", "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
  auto types = ParsePrometheus(r.text);
  const std::map<std::string, std::string> want = {
      {"khorovod_rendezvous_registered_workers", "gauge"},
      {"khorovod_rendezvous_active_workers", "gauge"},
      {"khorovod_rendezvous_generation", "gauge"},
      {"khorovod_rendezvous_last_formation_seconds", "gauge"},
      {"khorovod_rendezvous_joins_total", "counter"},
      {"khorovod_rendezvous_failures_total", "counter"},
      {"khorovod_rendezvous_blacklisted_workers", "gauge"},
      {"khorovod_rendezvous_http_responses_total", "counter"},
      {"khorovod_rendezvous_formation_seconds", "histogram"},
      {"khorovod_rendezvous_job_state", "gauge"},
  };
  for (const auto& [name, type] : want) EXPECT_EQ(types[name], type) << name;
  EXPECT_NE(r.text.find("khorovod_rendezvous_generation 1\n"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("khorovod_rendezvous_active_workers 1\n"), std::string::npos);
  EXPECT_NE(r.text.find("khorovod_rendezvous_joins_total 1\n"), std::string::npos);
  EXPECT_NE(r.text.find("khorovod_rendezvous_http_responses_total{code=\"200\"}"),
            std::string::npos);
  EXPECT_NE(r.text.find("khorovod_rendezvous_formation_seconds_count 1\n"), std::string::npos);
  EXPECT_NE(r.text.find("khorovod_rendezvous_job_state{state=\"running\"} 1\n"), std::string::npos);
}

}  // namespace
}  // namespace khorovod::rendezvous
