// Tests of the exposition library: the text writer, the registry (types,
// labels, histograms, misuse, concurrent updates), the HTTP endpoint, and
// promtool's verdict on what they produce.
#include <gtest/gtest.h>
#include <httplib.h>

#include <limits>
#include <thread>

#include "khorovod/metrics/http_endpoint.h"
#include "khorovod/metrics/registry.h"
#include "promtool.h"

namespace khorovod::metrics {
namespace {

TEST(TextWriter, WritesHelpTypeAndEscapedSamples) {
  TextWriter m;
  m.Gauge("a_gauge", "Help with \\ and\nnewline.", 2);
  m.Family("reqs_total", MetricType::kCounter, "Requests.");
  m.Sample("reqs_total", 1.5, {{"code", "2\"0\\0\n"}});
  EXPECT_EQ(m.text(),
            "# HELP a_gauge Help with \\\\ and\\nnewline.\n"
            "# TYPE a_gauge gauge\n"
            "a_gauge 2\n"
            "# HELP reqs_total Requests.\n"
            "# TYPE reqs_total counter\n"
            "reqs_total{code=\"2\\\"0\\\\0\\n\"} 1.5\n");
  EXPECT_EQ(TextWriter::FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(TextWriter::FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(TextWriter::FormatValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(TextWriter::FormatValue(123456789012.0), "123456789012");
  EXPECT_EQ(TextWriter::FormatValue(0.25), "0.25");
  EXPECT_THROW(m.Gauge("9bad", "x", 1), std::invalid_argument);
  EXPECT_THROW(m.Sample("ok", 1, {{"bad-label", "x"}}), std::invalid_argument);
}

TEST(Registry, RendersCountersGaugesAndHistogramsSortedByName) {
  Registry reg;
  reg.GetCounter("z_ops_total", "Ops.", {{"op", "b"}}).Increment(2);
  reg.GetCounter("z_ops_total", "Ops.", {{"op", "a"}}).Increment();
  reg.GetGauge("m_world_size", "World.").Set(4);
  Histogram& h = reg.GetHistogram("a_seconds", "Latency.", {0.1, 1});
  h.Observe(0.05);
  h.Observe(0.1);  // buckets are "less than or equal"
  h.Observe(0.5);
  h.Observe(7);
  EXPECT_EQ(reg.Render(),
            "# HELP a_seconds Latency.\n"
            "# TYPE a_seconds histogram\n"
            "a_seconds_bucket{le=\"0.1\"} 2\n"
            "a_seconds_bucket{le=\"1\"} 3\n"
            "a_seconds_bucket{le=\"+Inf\"} 4\n"
            "a_seconds_sum 7.65\n"
            "a_seconds_count 4\n"
            "# HELP m_world_size World.\n"
            "# TYPE m_world_size gauge\n"
            "m_world_size 4\n"
            "# HELP z_ops_total Ops.\n"
            "# TYPE z_ops_total counter\n"
            "z_ops_total{op=\"a\"} 1\n"
            "z_ops_total{op=\"b\"} 2\n");
}

TEST(Registry, SameNameAndLabelsGiveTheSameObject) {
  Registry reg;
  Counter& a = reg.GetCounter("x_total", "X.", {{"k", "v"}});
  EXPECT_EQ(&a, &reg.GetCounter("x_total", "X.", {{"k", "v"}}));
  EXPECT_NE(&a, &reg.GetCounter("x_total", "X.", {{"k", "w"}}));
}

TEST(Registry, MisuseThrows) {
  Registry reg;
  reg.GetCounter("x_total", "X.", {{"k", "v"}});
  EXPECT_THROW(reg.GetGauge("x_total", "X.", {{"k", "v"}}), std::invalid_argument) << "another type";
  EXPECT_THROW(reg.GetCounter("x_total", "Other help.", {{"k", "v"}}), std::invalid_argument);
  EXPECT_THROW(reg.GetCounter("x_total", "X.", {{"j", "v"}}), std::invalid_argument) << "other label names";
  EXPECT_THROW(reg.GetCounter("x_total", "X."), std::invalid_argument) << "missing labels";
  EXPECT_THROW(reg.GetCounter("bad-name", "X."), std::invalid_argument);
  EXPECT_THROW(reg.GetCounter("y_total", "Y.", {{"bad label", "v"}}), std::invalid_argument);
  EXPECT_THROW(reg.GetHistogram("h_seconds", "H.", {1}, {{"le", "1"}}), std::invalid_argument);
  EXPECT_THROW(reg.GetHistogram("h2_seconds", "H.", {1, 1}), std::invalid_argument) << "not increasing";
  EXPECT_THROW(reg.GetHistogram("h3_seconds", "H.", {std::numeric_limits<double>::infinity()}),
               std::invalid_argument);
  reg.GetHistogram("h4_seconds", "H.", {1, 2});
  EXPECT_THROW(reg.GetHistogram("h4_seconds", "H.", {1, 3}), std::invalid_argument) << "other bounds";
  EXPECT_THROW(ExponentialBuckets(0, 2, 3), std::invalid_argument);
  EXPECT_EQ(ExponentialBuckets(1, 2, 3), (std::vector<double>{1, 2, 4}));
}

TEST(Registry, CountersNeverGoDown) {
  Registry reg;
  Counter& c = reg.GetCounter("c_total", "C.");
  c.Increment(3);
  c.Increment(-1);
  c.Increment(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(c.Value(), 3);
  Gauge& g = reg.GetGauge("g", "G.");
  g.Add(2.5);
  g.Add(-1);
  EXPECT_EQ(g.Value(), 1.5);
}

TEST(Registry, ConcurrentUpdatesAndRendersLoseNothing) {
  Registry reg;
  Counter& c = reg.GetCounter("c_total", "C.");
  Histogram& h = reg.GetHistogram("h_seconds", "H.", {0.5});
  constexpr int kThreads = 4, kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        c.Increment();
        h.Observe(t % 2 ? 1.0 : 0.25);
        if (i % 5000 == 0) reg.GetCounter("late_total", "L.", {{"t", std::to_string(t)}}).Increment();
      }
    });
  }
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(reg.Render().empty());
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.Value(), kThreads * kPerThread);
  Histogram::Snapshot s = h.Read();
  EXPECT_EQ(s.count, uint64_t(kThreads * kPerThread));
  EXPECT_EQ(s.cumulative[0], uint64_t(kThreads / 2 * kPerThread));
  EXPECT_DOUBLE_EQ(s.sum, kPerThread * (2 * 1.0 + 2 * 0.25));
}

TEST(Registry, CollectorsRunAfterTheFamilies) {
  Registry reg;
  reg.GetGauge("b_gauge", "B.").Set(1);
  int calls = 0;
  reg.AddCollector([&](TextWriter& w) {
    ++calls;
    w.Gauge("a_computed", "Computed at scrape time.", 42);
  });
  const std::string text = reg.Render();
  EXPECT_EQ(calls, 1);
  EXPECT_LT(text.find("b_gauge 1"), text.find("a_computed 42")) << text;
}

// Every feature the registry renders (labels with characters that need
// escaping, histograms with and without labels, special values) passes
// promtool's parser and linter.
TEST(Registry, PromtoolAcceptsTheExposition) {
  Registry reg;
  reg.GetCounter("khorovod_test_requests_total", "Requests \\ with \"quotes\"\nand a newline.",
                 {{"code", "200"}, {"path", "/a\"b\\c\nd"}})
      .Increment(5);
  reg.GetGauge("khorovod_test_ratio", "A ratio.").Set(std::numeric_limits<double>::quiet_NaN());
  reg.GetGauge("khorovod_test_limit_bytes", "A limit.").Set(std::numeric_limits<double>::infinity());
  reg.GetHistogram("khorovod_test_duration_seconds", "Durations.", ExponentialBuckets(0.001, 4, 6)).Observe(0.02);
  reg.GetHistogram("khorovod_test_size_bytes", "Sizes.", {1024, 65536}, {{"op", "allreduce"}}).Observe(4096);
  reg.GetHistogram("khorovod_test_size_bytes", "Sizes.", {1024, 65536}, {{"op", "broadcast"}});
  reg.AddCollector([](TextWriter& w) { w.Gauge("khorovod_test_computed", "Computed.", -3.5); });
  const auto r = testing::PromtoolCheckMetrics(reg.Render());
  EXPECT_TRUE(r.ok()) << "exit " << r.exit_code << ": " << r.output << "\n" << reg.Render();
}

TEST(PromtoolHelper, RejectsABrokenExposition) {
  // The helper must be able to fail: a counter without _total is a lint error.
  auto r = testing::PromtoolCheckMetrics("# HELP bad Bad.\n# TYPE bad counter\nbad 1\n");
  EXPECT_FALSE(r.ok());
}

TEST(MetricsEndpoint, ServesTheRegistryOnLoopback) {
  Registry reg;
  reg.GetGauge("khorovod_test_up", "Up.").Set(1);
  MetricsEndpoint endpoint({"127.0.0.1", 0, 1}, reg);
  Status started = endpoint.Start();
  ASSERT_TRUE(started.ok()) << started.message();
  ASSERT_GT(endpoint.port(), 0);
  httplib::Client client("127.0.0.1", endpoint.port());
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(5, 0);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), TextWriter::kContentType);
  EXPECT_NE(res->body.find("khorovod_test_up 1\n"), std::string::npos) << res->body;
  reg.GetGauge("khorovod_test_up", "Up.").Set(0);
  res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("khorovod_test_up 0\n"), std::string::npos) << "rendered per scrape";
  res = client.Get("/other");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);

  // A second endpoint on the same port fails with a message naming it.
  MetricsEndpoint clash({"127.0.0.1", endpoint.port(), 1}, reg);
  const Status clashed = clash.Start();
  EXPECT_EQ(clashed.code(), StatusCode::kUnavailable);
  EXPECT_NE(clashed.message().find(std::to_string(endpoint.port())), std::string::npos) << clashed.message();
  endpoint.Stop();
  endpoint.Stop();  // idempotent
}

TEST(MetricsEndpoint, RejectsBadOptionsAndFailingRenders) {
  MetricsEndpoint bad_port({"127.0.0.1", 70000, 1}, [] { return std::string(); });
  const Status bad = bad_port.Start();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("70000"), std::string::npos) << bad.message();
  MetricsEndpoint throwing({"127.0.0.1", 0, 1}, []() -> std::string { throw std::runtime_error("boom"); });
  const Status started = throwing.Start();
  ASSERT_TRUE(started.ok()) << started.message();
  httplib::Client client("127.0.0.1", throwing.port());
  client.set_read_timeout(5, 0);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 500);
}

}  // namespace
}  // namespace khorovod::metrics
