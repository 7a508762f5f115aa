// RendezvousClient against a real in-process server: the worker life cycle,
// joins, failures, error mapping, and riding out a server restart.
#include "rendezvous_client.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <memory>
#include <vector>

#include "test_server.h"

namespace khorovod::rendezvous {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kLong{30000};

RendezvousClientOptions FastRetry() {
  RendezvousClientOptions o;
  o.retry.max_attempts = 3;
  o.retry.initial_backoff = milliseconds(10);
  return o;
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(RendezvousClient, RegisterGenerationHeartbeatJoinAndLeave) {
  testing::TestServer server;
  RendezvousClient a(server.endpoint(), testing::kJob, {"a", "127.0.0.1", 2});
  ASSERT_TRUE(a.Register().ok());
  EXPECT_GT(a.heartbeat_interval().count(), 0);
  StatusOr<GenerationInfo> g1 = a.WaitForNextGeneration(kLong);
  ASSERT_TRUE(g1.ok()) << g1.status().message();
  EXPECT_EQ(g1->generation, 1);
  EXPECT_EQ(g1->rank, 0);
  EXPECT_EQ(g1->size, 1);
  ASSERT_EQ(g1->world.size(), 1u);
  EXPECT_EQ(g1->world[0].name, "a");
  EXPECT_EQ(g1->server_id, a.server_id());
  StatusOr<HeartbeatInfo> hb = a.Heartbeat();
  ASSERT_TRUE(hb.ok()) << hb.status().message();
  EXPECT_TRUE(hb->active);
  EXPECT_FALSE(hb->membership_changed);
  EXPECT_FALSE(hb->job_failed);
  EXPECT_EQ(hb->generation, 1);

  // b joins: it waits until a, at its next commit point, asks for generation 2.
  RendezvousClient b(server.endpoint(), testing::kJob, {"b", "127.0.0.1", 2});
  ASSERT_TRUE(b.Register().ok());
  auto b_gen = std::async(std::launch::async, [&] { return b.WaitForNextGeneration(kLong); });
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto h = a.Heartbeat();
        return h.ok() && h->membership_changed;
      },
      kLong));
  StatusOr<GenerationInfo> g2 = a.WaitForNextGeneration(kLong);
  ASSERT_TRUE(g2.ok()) << g2.status().message();
  StatusOr<GenerationInfo> g2b = b_gen.get();
  ASSERT_TRUE(g2b.ok()) << g2b.status().message();
  EXPECT_EQ(g2->generation, 2);
  EXPECT_EQ(g2b->generation, 2);
  EXPECT_EQ(g2->rank, 0) << "the survivor keeps rank 0";
  EXPECT_EQ(g2b->rank, 1);
  EXPECT_EQ(g2b->local_size, 2);
  EXPECT_EQ(a.last_generation(), 2);

  // a leaves; b is told and re-forms alone.
  ASSERT_TRUE(a.Leave("done").ok());
  ASSERT_TRUE(a.Leave("again").ok()) << "leaving twice is fine";
  hb = b.Heartbeat();
  ASSERT_TRUE(hb.ok());
  EXPECT_TRUE(hb->membership_changed);
  StatusOr<GenerationInfo> g3 = b.WaitForNextGeneration(kLong);
  ASSERT_TRUE(g3.ok()) << g3.status().message();
  EXPECT_EQ(g3->generation, 3);
  EXPECT_EQ(g3->rank, 0);
  EXPECT_EQ(g3->size, 1);
}

TEST(RendezvousClient, ReportedFailureRemovesTheWorker) {
  ServerOptions options = testing::DefaultOptions();
  options.service.policy.min_workers = 2;
  testing::TestServer server(options);
  RendezvousClient a(server.endpoint(), testing::kJob, {"a", "10.0.0.1", 1});
  RendezvousClient b(server.endpoint(), testing::kJob, {"b", "10.0.0.2", 1});
  ASSERT_TRUE(a.Register().ok());
  ASSERT_TRUE(b.Register().ok());
  auto a_gen = std::async(std::launch::async, [&] { return a.WaitForNextGeneration(kLong); });
  StatusOr<GenerationInfo> gb = b.WaitForNextGeneration(kLong);
  ASSERT_TRUE(gb.ok()) << gb.status().message();
  ASSERT_TRUE(a_gen.get().ok());
  EXPECT_EQ(gb->cross_size, 2);
  EXPECT_EQ(gb->cross_rank, 1);
  ASSERT_TRUE(b.ReportFailure("CUDA error").ok());
  auto hb = a.Heartbeat();
  ASSERT_TRUE(hb.ok());
  EXPECT_TRUE(hb->membership_changed);
  // Below min: a waits in vain (bounded) until a worker comes back.
  StatusOr<GenerationInfo> none = a.WaitForNextGeneration(milliseconds(200));
  EXPECT_EQ(none.status().code(), StatusCode::kDeadlineExceeded) << none.status().message();
  auto a_next = std::async(std::launch::async, [&] { return a.WaitForNextGeneration(kLong); });
  RendezvousClient c(server.endpoint(), testing::kJob, {"c", "10.0.0.3", 1});
  ASSERT_TRUE(c.Register().ok());
  StatusOr<GenerationInfo> gc = c.WaitForNextGeneration(kLong);
  ASSERT_TRUE(gc.ok()) << gc.status().message();
  StatusOr<GenerationInfo> ga = a_next.get();
  ASSERT_TRUE(ga.ok()) << ga.status().message();
  EXPECT_EQ(ga->rank, 0);
  EXPECT_EQ(gc->rank, 1);
  EXPECT_EQ(gc->generation, 2);
}

// Three pods, two of them on node n1: each learns its placement by pod
// (address) and by node (the node it declared), and a node name that is no
// name is refused at registration.
TEST(RendezvousClient, PlacementByNodeComesWithTheGeneration) {
  ServerOptions options = testing::DefaultOptions();
  options.service.policy.min_workers = 3;
  testing::TestServer server(options);
  std::vector<std::unique_ptr<RendezvousClient>> clients;
  const char* nodes[] = {"n1", "n2", "n1"};
  for (int i = 0; i < 3; ++i) {
    WorkerIdentity self{"w" + std::to_string(i), "10.0.0." + std::to_string(i + 1), 1};
    self.node = nodes[i];
    clients.push_back(std::make_unique<RendezvousClient>(server.endpoint(), testing::kJob, self));
    ASSERT_TRUE(clients.back()->Register().ok());
  }
  std::vector<std::future<StatusOr<GenerationInfo>>> gens;
  for (auto& c : clients)
    gens.push_back(
        std::async(std::launch::async, [&c] { return c->WaitForNextGeneration(kLong); }));
  std::vector<GenerationInfo> g;
  for (auto& f : gens) {
    StatusOr<GenerationInfo> one = f.get();
    ASSERT_TRUE(one.ok()) << one.status().message();
    g.push_back(*one);
  }
  std::sort(g.begin(), g.end(), [](const auto& x, const auto& y) { return x.rank < y.rank; });
  for (const GenerationInfo& one : g) {
    EXPECT_EQ(one.local_size, 1) << "by pod: one slot each";
    EXPECT_EQ(one.cross_size, 3);
    EXPECT_EQ(one.by_node.rank, one.rank);
    EXPECT_EQ(one.by_node.cross_size, 2);
  }
  // Ranks follow registration order here: w0 (n1), w1 (n2), w2 (n1).
  EXPECT_EQ(g[0].by_node.local_rank, 0);
  EXPECT_EQ(g[0].by_node.local_size, 2);
  EXPECT_EQ(g[2].by_node.local_rank, 1);
  EXPECT_EQ(g[2].by_node.cross_rank, 0);
  EXPECT_EQ(g[1].by_node.local_size, 1);
  EXPECT_EQ(g[1].by_node.cross_rank, 1);

  WorkerIdentity bad{"w9", "10.0.0.9", 1};
  bad.node = "no such/node";
  RendezvousClient refused(server.endpoint(), testing::kJob, bad, FastRetry());
  Status s = refused.Register();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_TRUE(Contains(s.message(), "node")) << s.message();
}

TEST(RendezvousClient, ErrorsMapToStatusCodes) {
  ServerOptions options = testing::DefaultOptions();
  options.service.policy.min_workers = 2;
  options.service.policy.blacklist_threshold = 1;
  options.service.policy.blacklist_base = milliseconds(60000);
  options.service.policy.blacklist_max = milliseconds(60000);
  testing::TestServer server(options);

  RendezvousClient wrong_token(server.endpoint("nope"), testing::kJob, {"a", "h", 1}, FastRetry());
  Status s = wrong_token.Register();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(s.message(), "HTTP 401")) << s.message();
  EXPECT_TRUE(Contains(s.message(), "unauthenticated")) << s.message();

  RendezvousClient wrong_job(server.endpoint(), "job2", {"a", "h", 1}, FastRetry());
  s = wrong_job.Register();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(s.message(), "unknown_job")) << s.message();

  RendezvousClient bad_slots(server.endpoint(), testing::kJob, {"a", "h", 0}, FastRetry());
  s = bad_slots.Register();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.message(), "HTTP 400")) << s.message();

  RendezvousClient a(server.endpoint(), testing::kJob, {"a", "h", 1}, FastRetry());
  ASSERT_TRUE(a.Register().ok());
  StatusOr<GenerationInfo> g = a.WaitForNextGeneration(milliseconds(100));
  EXPECT_EQ(g.status().code(), StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(a.ReportFailure("bad disk").ok());
  // The name's next process (a restarted pod) is blacklisted; this one is fenced.
  RendezvousClient restarted(server.endpoint(), testing::kJob, {"a", "h", 1}, FastRetry());
  s = restarted.Register();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Contains(s.message(), "HTTP 429 blacklisted")) << s.message();
  EXPECT_TRUE(Contains(s.message(), "retry after")) << s.message();

  int port = server.port();
  server.Stop();
  RendezvousClient gone(HttpEndpoint{"127.0.0.1", port, testing::kToken}, testing::kJob,
                        {"z", "h", 1}, FastRetry());
  s = gone.Register();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Contains(s.message(), "after 3 attempts")) << s.message();
}

// A worker name in blacklist cooldown (e.g. a pod that failed twice and was
// restarted under the same name) registers once the cooldown is over when it
// may wait that long, and fails clearly when it may not.
TEST(RendezvousClient, ABlacklistedRegistrationIsRetriedAfterItsCooldown) {
  ServerOptions options = testing::DefaultOptions();
  options.service.policy.blacklist_threshold = 1;
  options.service.policy.blacklist_base = milliseconds(600);
  options.service.policy.blacklist_max = milliseconds(600);
  testing::TestServer server(options);
  RendezvousClient a(server.endpoint(), testing::kJob, {"a", "h", 1}, FastRetry());
  ASSERT_TRUE(a.Register().ok());
  ASSERT_TRUE(a.ReportFailure("crashed").ok());
  RendezvousClient restarted(server.endpoint(), testing::kJob, {"a", "h", 1}, FastRetry());

  auto start = std::chrono::steady_clock::now();
  Status s = restarted.Register(milliseconds(100));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Contains(s.message(), "blacklisted")) << s.message();
  EXPECT_TRUE(Contains(s.message(), "elastic timeout")) << s.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(400))
      << "it must not sleep past its patience";

  s = restarted.Register(milliseconds(20000));
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(500))
      << "it registered during the cooldown";
  StatusOr<GenerationInfo> g = restarted.WaitForNextGeneration(kLong);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->size, 1);
}

// A heartbeat from a worker the server removed as failed reports it fenced
// (rendezvous_fencing_test.cc), neither forgotten nor registered again: the
// runtime leaves its generation, and the process ends.
TEST(RendezvousClient, AHeartbeatOfAWorkerRemovedAsFailedReportsItFenced) {
  ServerOptions options = testing::DefaultOptions();
  options.service.policy.blacklist_threshold = 1;
  options.service.policy.blacklist_base = milliseconds(60000);
  options.service.policy.blacklist_max = milliseconds(60000);
  testing::TestServer server(options);
  RendezvousClient a(server.endpoint(), testing::kJob, {"a", "h", 1}, FastRetry());
  ASSERT_TRUE(a.Register().ok());
  ASSERT_TRUE(a.ReportFailure("crashed").ok());  // removed, blacklisted and fenced
  StatusOr<HeartbeatInfo> hb = a.Heartbeat();
  ASSERT_TRUE(hb.ok()) << hb.status().message();
  EXPECT_TRUE(hb->fenced);
  EXPECT_FALSE(hb->forgotten);
  EXPECT_FALSE(hb->reregistered);
}

// After Leave(), an "unknown worker" answer does not register the worker
// again behind its back; an explicit Register() does.
TEST(RendezvousClient, AWorkerThatLeftIsNotReRegisteredImplicitly) {
  testing::TestServer server(testing::DefaultOptions());
  RendezvousClient a(server.endpoint(), testing::kJob, {"a", "h", 1}, FastRetry());
  ASSERT_TRUE(a.Register().ok());
  ASSERT_TRUE(a.Leave("shutdown").ok());
  StatusOr<HeartbeatInfo> hb = a.Heartbeat();
  ASSERT_TRUE(hb.ok()) << hb.status().message();
  EXPECT_TRUE(hb->forgotten);
  EXPECT_FALSE(hb->reregistered);
  EXPECT_TRUE(a.Register().ok());
  hb = a.Heartbeat();
  ASSERT_TRUE(hb.ok()) << hb.status().message();
  EXPECT_FALSE(hb->forgotten);
}

TEST(RendezvousClient, AFailedJobIsReportedToWorkers) {
  ServerOptions options = testing::DefaultOptions();
  options.service.policy.min_workers = 2;
  options.service.policy.elastic_timeout = milliseconds(200);
  testing::TestServer server(options);
  RendezvousClient a(server.endpoint(), testing::kJob, {"a", "h", 1});
  ASSERT_TRUE(a.Register().ok());
  StatusOr<HeartbeatInfo> hb = Status::Internal("unset");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        hb = a.Heartbeat();
        return hb.ok() && hb->job_failed;
      },
      kLong));
  EXPECT_TRUE(Contains(hb->failure_reason, "elastic timeout")) << hb->failure_reason;
  StatusOr<GenerationInfo> g = a.WaitForNextGeneration(kLong);
  EXPECT_EQ(g.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(g.status().message(), "job_failed")) << g.status().message();
  RendezvousClient b(server.endpoint(), testing::kJob, {"b", "h", 1});
  EXPECT_EQ(b.Register().code(), StatusCode::kFailedPrecondition);
}

TEST(RendezvousClient, ServerRestartLeadsToReRegistrationAndANewGeneration) {
  ServerOptions options = testing::DefaultOptions();
  options.service.policy.min_workers = 2;
  options.service.policy.max_workers = 2;
  testing::TestServer server(options);
  RendezvousClient a(server.endpoint(), testing::kJob, {"a", "127.0.0.1", 2});
  RendezvousClient b(server.endpoint(), testing::kJob, {"b", "127.0.0.1", 2});
  ASSERT_TRUE(a.Register().ok());
  ASSERT_TRUE(b.Register().ok());
  auto b_gen = std::async(std::launch::async, [&] { return b.WaitForNextGeneration(kLong); });
  StatusOr<GenerationInfo> g1 = a.WaitForNextGeneration(kLong);
  ASSERT_TRUE(g1.ok()) << g1.status().message();
  ASSERT_TRUE(b_gen.get().ok());
  const std::string old_server = a.server_id();

  server.Restart();  // all state is gone

  // a's heartbeat finds itself unknown and registers again.
  StatusOr<HeartbeatInfo> hb = a.Heartbeat();
  ASSERT_TRUE(hb.ok()) << hb.status().message();
  EXPECT_TRUE(hb->reregistered);
  EXPECT_TRUE(hb->membership_changed);
  EXPECT_FALSE(hb->active);
  EXPECT_EQ(hb->generation, 0);
  EXPECT_NE(a.server_id(), old_server);
  EXPECT_EQ(a.last_generation(), 0);
  // b never heartbeated: its generation request re-registers it.
  auto b_next = std::async(std::launch::async, [&] { return b.WaitForNextGeneration(kLong); });
  StatusOr<GenerationInfo> a2 = a.WaitForNextGeneration(kLong);
  StatusOr<GenerationInfo> b2 = b_next.get();
  ASSERT_TRUE(a2.ok()) << a2.status().message();
  ASSERT_TRUE(b2.ok()) << b2.status().message();
  EXPECT_EQ(a2->generation, 1) << "the new server starts counting again";
  EXPECT_EQ(b2->generation, 1);
  EXPECT_EQ(a2->size, 2);
  EXPECT_NE(a2->rank, b2->rank);
  EXPECT_EQ(a2->server_id, b2->server_id);
  EXPECT_NE(a2->server_id, old_server);
}

}  // namespace
}  // namespace khorovod::rendezvous
