// The rendezvous server's metrics: served without a token on the separate
// metrics port, complete (every family docs/observability.md lists for it),
// and accepted by promtool.
#include <gtest/gtest.h>
#include <httplib.h>

#include "http_server.h"
#include "promtool.h"

namespace khorovod::rendezvous {
namespace {

TEST(RendezvousMetrics, MetricsPortServesValidExpositionWithoutToken) {
  ServerOptions options;
  options.token = "t0ken";
  options.service.job = "job1";
  options.service.log = false;
  options.service.policy.settle = Millis(0);
  options.metrics_port = 0;
  RendezvousServer server(options);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_GT(server.metrics_port(), 0);
  ASSERT_NE(server.metrics_port(), server.port());

  // One worker forms generation 1.
  RendezvousService& svc = server.service();
  ASSERT_EQ(svc.Register({"w0", "127.0.0.1", 1}).status, 200);
  Reply next = svc.AwaitNext("w0", 0, Millis(5000));
  ASSERT_EQ(next.status, 200);
  ASSERT_EQ(next.body["ready"], true);

  httplib::Client client("127.0.0.1", server.metrics_port());
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(5, 0);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  ASSERT_EQ(res->status, 200);
  const std::string& text = res->body;
  for (const char* want :
       {"khorovod_rendezvous_registered_workers 1\n", "khorovod_rendezvous_active_workers 1\n",
        "khorovod_rendezvous_generation 1\n", "khorovod_rendezvous_joins_total 1\n",
        "khorovod_rendezvous_failures_total 0\n", "khorovod_rendezvous_blacklisted_workers 0\n",
        "khorovod_rendezvous_formation_seconds_count 1\n",
        "khorovod_rendezvous_job_state{state=\"running\"} 1\n"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << " missing from:\n" << text;
  }
  const auto check = metrics::testing::PromtoolCheckMetrics(text);
  EXPECT_TRUE(check.ok()) << "exit " << check.exit_code << ": " << check.output << "\n" << text;
  server.Stop();
}

TEST(RendezvousMetrics, MetricsPortInUseFailsStart) {
  ServerOptions first;
  first.token = "t";
  first.service.log = false;
  first.metrics_port = 0;
  RendezvousServer a(first);
  ASSERT_TRUE(a.Start().ok());
  ServerOptions second = first;
  second.metrics_port = a.metrics_port();
  RendezvousServer b(second);
  Status s = b.Start();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.message();
  EXPECT_NE(s.message().find(std::to_string(a.metrics_port())), std::string::npos) << s.message();
}

}  // namespace
}  // namespace khorovod::rendezvous
