// Tests of khorovod/metrics: what Render() makes of prometheus-cpp's
// registries and of scrape-time collectors (order, format, promtool's
// verdict), the Get* helpers, and the HTTP endpoint.
#include "khorovod/metrics/exposition.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <limits>
#include <thread>

#include "khorovod/metrics/http_endpoint.h"
#include "promtool.h"

namespace khorovod::metrics {
namespace {

TEST(Render, SortsFamiliesByNameAndSamplesByLabels) {
  prometheus::Registry reg;
  GetCounter(reg, "z_ops_total", "Ops.", {{"op", "b"}}).Increment(2);
  GetCounter(reg, "z_ops_total", "Ops.", {{"op", "a"}}).Increment();
  GetGauge(reg, "m_world_size", "World.").Set(4);
  prometheus::Histogram& h = GetHistogram(reg, "a_seconds", "Latency.", {0.1, 1});
  h.Observe(0.05);
  h.Observe(0.1);  // buckets are "less than or equal"
  h.Observe(0.5);
  h.Observe(7);
  ScrapeCollector computed(
      [] { return std::vector<prometheus::MetricFamily>{Gauge("b_computed", "B.", 42)}; });
  EXPECT_EQ(Render({&reg, &computed}),
            "# HELP a_seconds Latency.\n"
            "# TYPE a_seconds histogram\n"
            "a_seconds_count 4\n"
            "a_seconds_sum 7.65\n"
            "a_seconds_bucket{le=\"0.1\"} 2\n"
            "a_seconds_bucket{le=\"1\"} 3\n"
            "a_seconds_bucket{le=\"+Inf\"} 4\n"
            "# HELP b_computed B.\n"
            "# TYPE b_computed gauge\n"
            "b_computed 42\n"
            "# HELP m_world_size World.\n"
            "# TYPE m_world_size gauge\n"
            "m_world_size 4\n"
            "# HELP z_ops_total Ops.\n"
            "# TYPE z_ops_total counter\n"
            "z_ops_total{op=\"a\"} 1\n"
            "z_ops_total{op=\"b\"} 2\n");
}

TEST(Render, LargeCountsAndSpecialValuesKeepTheirDigits) {
  prometheus::Registry reg;
  GetCounter(reg, "big_bytes_total", "B.").Increment(123456789012.0);
  GetGauge(reg, "inf_limit", "I.").Set(std::numeric_limits<double>::infinity());
  const std::string text = Render({&reg});
  EXPECT_NE(text.find("big_bytes_total 123456789012\n"), std::string::npos) << text;
  EXPECT_NE(text.find("inf_limit +Inf\n"), std::string::npos) << text;
}

TEST(GetHelpers, SameNameAndLabelsGiveTheSameObject) {
  prometheus::Registry reg;
  prometheus::Counter& a = GetCounter(reg, "x_total", "X.", {{"k", "v"}});
  EXPECT_EQ(&a, &GetCounter(reg, "x_total", "X.", {{"k", "v"}}));
  EXPECT_NE(&a, &GetCounter(reg, "x_total", "X.", {{"k", "w"}}));
  prometheus::Histogram& h = GetHistogram(reg, "h_seconds", "H.", {1, 2});
  EXPECT_EQ(&h, &GetHistogram(reg, "h_seconds", "H.", {1, 2}));
}

TEST(GetHelpers, MisuseThrows) {
  prometheus::Registry reg;
  GetCounter(reg, "x_total", "X.");
  EXPECT_THROW(GetGauge(reg, "x_total", "X."), std::invalid_argument) << "another type";
  EXPECT_THROW(GetCounter(reg, "bad-name", "X."), std::invalid_argument);
  EXPECT_THROW(GetCounter(reg, "y_total", "Y.", {{"bad label", "v"}}), std::invalid_argument);
  EXPECT_THROW(GetHistogram(reg, "h2_seconds", "H.", {1, 1}), std::invalid_argument)
      << "not increasing";
  EXPECT_THROW(ExponentialBuckets(0, 2, 3), std::invalid_argument);
  EXPECT_THROW(ExponentialBuckets(1, 1, 3), std::invalid_argument);
  EXPECT_EQ(ExponentialBuckets(1, 2, 3), (std::vector<double>{1, 2, 4}));
  prometheus::MetricFamily histogram;
  histogram.type = prometheus::MetricType::Histogram;
  EXPECT_THROW(AddSample(histogram, 1), std::invalid_argument);
}

TEST(Render, ConcurrentUpdatesAndRendersLoseNothing) {
  prometheus::Registry reg;
  prometheus::Counter& c = GetCounter(reg, "c_total", "C.");
  prometheus::Histogram& h = GetHistogram(reg, "h_seconds", "H.", {0.5});
  constexpr int kThreads = 4, kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        c.Increment();
        h.Observe(t % 2 ? 1.0 : 0.25);
        if (i % 5000 == 0)
          GetCounter(reg, "late_total", "L.", {{"t", std::to_string(t)}}).Increment();
      }
    });
  }
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(Render({&reg}).empty());
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.Value(), kThreads * kPerThread);
  const prometheus::ClientMetric::Histogram s = h.Collect().histogram;
  EXPECT_EQ(s.sample_count, uint64_t(kThreads * kPerThread));
  EXPECT_EQ(s.bucket[0].cumulative_count, uint64_t(kThreads / 2 * kPerThread));
  EXPECT_DOUBLE_EQ(s.sample_sum, kPerThread * (2 * 1.0 + 2 * 0.25));
}

// Every feature the project renders (labels with characters that need
// escaping, histograms with and without labels, special values, collectors)
// passes promtool's parser and linter.
TEST(Render, PromtoolAcceptsTheExposition) {
  prometheus::Registry reg;
  GetCounter(reg, "khorovod_test_requests_total", "Requests with \"quotes\".",
             {{"code", "200"}, {"path", "/a\"b\\c\nd"}})
      .Increment(5);
  GetGauge(reg, "khorovod_test_ratio", "A ratio.").Set(std::numeric_limits<double>::quiet_NaN());
  GetGauge(reg, "khorovod_test_limit_bytes", "A limit.")
      .Set(std::numeric_limits<double>::infinity());
  GetHistogram(reg, "khorovod_test_duration_seconds", "Durations.", ExponentialBuckets(0.001, 4, 6))
      .Observe(0.02);
  GetHistogram(reg, "khorovod_test_size_bytes", "Sizes.", {1024, 65536}, {{"op", "allreduce"}})
      .Observe(4096);
  GetHistogram(reg, "khorovod_test_size_bytes", "Sizes.", {1024, 65536}, {{"op", "broadcast"}});
  ScrapeCollector computed([] {
    prometheus::MetricFamily f = GaugeFamily("khorovod_test_state", "States.");
    AddSample(f, 1, {{"state", "running"}});
    AddSample(f, 0, {{"state", "failed"}});
    return std::vector<prometheus::MetricFamily>{
        f, Gauge("khorovod_test_computed", "Computed.", -3.5),
        Counter("khorovod_test_events_total", "Events.", 7)};
  });
  const std::string text = Render({&reg, &computed});
  const auto r = testing::PromtoolCheckMetrics(text);
  EXPECT_TRUE(r.ok()) << "exit " << r.exit_code << ": " << r.output << "\n" << text;
}

TEST(PromtoolHelper, RejectsABrokenExposition) {
  // The helper must be able to fail: a counter without _total is a lint error.
  auto r = testing::PromtoolCheckMetrics("# HELP bad Bad.\n# TYPE bad counter\nbad 1\n");
  EXPECT_FALSE(r.ok());
}

TEST(MetricsEndpoint, ServesTheRegistryOnLoopback) {
  prometheus::Registry reg;
  GetGauge(reg, "khorovod_test_up", "Up.").Set(1);
  MetricsEndpoint endpoint({"127.0.0.1", 0, 1}, [&reg] { return Render({&reg}); });
  Status started = endpoint.Start();
  ASSERT_TRUE(started.ok()) << started.message();
  ASSERT_GT(endpoint.port(), 0);
  httplib::Client client("127.0.0.1", endpoint.port());
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(5, 0);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), kContentType);
  EXPECT_NE(res->body.find("khorovod_test_up 1\n"), std::string::npos) << res->body;
  GetGauge(reg, "khorovod_test_up", "Up.").Set(0);
  res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("khorovod_test_up 0\n"), std::string::npos) << "rendered per scrape";
  res = client.Get("/other");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);

  // A second endpoint on the same port fails with a message naming it.
  MetricsEndpoint clash({"127.0.0.1", endpoint.port(), 1}, [&reg] { return Render({&reg}); });
  const Status clashed = clash.Start();
  EXPECT_EQ(clashed.code(), StatusCode::kUnavailable);
  EXPECT_NE(clashed.message().find(std::to_string(endpoint.port())), std::string::npos)
      << clashed.message();
  endpoint.Stop();
  endpoint.Stop();  // idempotent
}

TEST(MetricsEndpoint, RejectsBadOptionsAndFailingRenders) {
  MetricsEndpoint bad_port({"127.0.0.1", 70000, 1}, [] { return std::string(); });
  const Status bad = bad_port.Start();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("70000"), std::string::npos) << bad.message();
  MetricsEndpoint throwing({"127.0.0.1", 0, 1},
                           []() -> std::string { throw std::runtime_error("boom"); });
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
