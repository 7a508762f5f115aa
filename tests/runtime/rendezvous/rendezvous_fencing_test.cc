// Fencing over HTTP: a client whose incarnation the server declared lost is
// answered 410 worker_fenced and never registers again, while a new process
// under the same name (its replacement) trains on.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "protocol.h"
#include "rendezvous_client.h"
#include "test_server.h"

namespace khorovod::rendezvous {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kLong{30000};

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// `zombie` and `other` form generation 1; then the zombie stays silent past
// the heartbeat timeout (its node cut off) while `other` beats, until the
// server has dropped it.
void FormAndLoseTheZombie(RendezvousClient& zombie, RendezvousClient& other) {
  ASSERT_TRUE(zombie.Register().ok());
  ASSERT_TRUE(other.Register().ok());
  auto z1 = std::async(std::launch::async, [&] { return zombie.WaitForNextGeneration(kLong); });
  ASSERT_TRUE(other.WaitForNextGeneration(kLong).ok());
  ASSERT_TRUE(z1.get().ok());
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto hb = other.Heartbeat();
        return hb.ok() && hb->membership_changed;
      },
      kLong));
}

TEST(RendezvousFencing, AWorkerDeclaredLostIsRefusedAndItsReplacementKeepsTheName) {
  ServerOptions options = testing::DefaultOptions();
  options.service.policy.min_workers = 1;
  options.service.policy.heartbeat_timeout = milliseconds(300);
  testing::TestServer server(options);
  RendezvousClient zombie(server.endpoint(), testing::kJob, {"job-worker-0", "10.0.0.1", 1});
  RendezvousClient other(server.endpoint(), testing::kJob, {"job-worker-1", "10.0.0.2", 1});
  EXPECT_FALSE(zombie.incarnation().empty());
  EXPECT_NE(zombie.incarnation(), other.incarnation());
  FormAndLoseTheZombie(zombie, other);
  if (HasFatalFailure()) return;

  // Its replacement (a new pod under the same name) registers and joins.
  RendezvousClient replacement(server.endpoint(), testing::kJob, {"job-worker-0", "10.0.0.3", 1});
  ASSERT_TRUE(replacement.Register().ok());
  auto r2 =
      std::async(std::launch::async, [&] { return replacement.WaitForNextGeneration(kLong); });
  auto o2 = std::async(std::launch::async, [&] { return other.WaitForNextGeneration(kLong); });

  // The zombie comes back from its partition: its heartbeat is answered
  // fenced (not unknown_worker, which would make it register again).
  StatusOr<HeartbeatInfo> hb = zombie.Heartbeat();
  ASSERT_TRUE(hb.ok()) << hb.status().message();
  EXPECT_TRUE(hb->fenced);
  EXPECT_FALSE(hb->reregistered);
  StatusOr<GenerationInfo> g = zombie.WaitForNextGeneration(milliseconds(2000));
  EXPECT_EQ(g.status().code(), StatusCode::kFailedPrecondition) << g.status().message();
  EXPECT_TRUE(Contains(g.status().message(), error_code::kWorkerFenced)) << g.status().message();
  Status again = zombie.Register();
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition) << again.message();
  EXPECT_FALSE(zombie.Leave("back from the partition").ok())
      << "a fenced worker cannot remove its replacement";

  StatusOr<GenerationInfo> gr = r2.get();
  StatusOr<GenerationInfo> go = o2.get();
  ASSERT_TRUE(gr.ok()) << gr.status().message();
  ASSERT_TRUE(go.ok()) << go.status().message();
  EXPECT_EQ(gr->generation, go->generation);
  ASSERT_EQ(gr->world.size(), 2u);
  EXPECT_EQ(gr->world[gr->rank].address, "10.0.0.3")
      << "the replacement's registration was not overwritten";
  // The replacement's own calls are fine.
  StatusOr<HeartbeatInfo> rhb = replacement.Heartbeat();
  ASSERT_TRUE(rhb.ok()) << rhb.status().message();
  EXPECT_FALSE(rhb->fenced);
  EXPECT_TRUE(rhb->active);
}

// A zombie that comes back after training finished is sent away like a late
// joiner (JOB_FINISHED: it exits 0), not as a failure.
TEST(RendezvousFencing, AZombieOfAFinishingJobIsToldTheJobIsFinishing) {
  ServerOptions options = testing::DefaultOptions();
  options.service.policy.heartbeat_timeout = milliseconds(300);
  testing::TestServer server(options);
  RendezvousClient zombie(server.endpoint(), testing::kJob, {"w0", "10.0.0.1", 1});
  RendezvousClient other(server.endpoint(), testing::kJob, {"w1", "10.0.0.2", 1});
  FormAndLoseTheZombie(zombie, other);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(other.Leave(kLeaveFinished).ok());
  StatusOr<GenerationInfo> g = zombie.WaitForNextGeneration(milliseconds(2000));
  EXPECT_EQ(g.status().code(), StatusCode::kJobFinished) << g.status().message();
  EXPECT_TRUE(Contains(g.status().message(), "declared lost")) << g.status().message();
}

TEST(RendezvousFencing, TheRawApiAnswers410ForAFencedIncarnation) {
  testing::TestServer server;
  const std::string path = WorkersPath(testing::kJob);
  auto reg = [&](const std::string& inc) {
    return testing::Send(
        server.port(), "POST", path,
        R"({"name":"w","address":"10.0.0.1","slots":1,"incarnation":")" + inc + R"("})");
  };
  ASSERT_EQ(reg("one").status, 200);
  ASSERT_EQ(testing::Send(server.port(), "POST", WorkerPath(testing::kJob, "w", "failure"),
                          R"({"reason":"crash","incarnation":"one"})")
                .status,
            200);
  testing::RawReply hb =
      testing::Send(server.port(), "POST", WorkerPath(testing::kJob, "w", "heartbeat"),
                    R"({"incarnation":"one"})");
  EXPECT_EQ(hb.status, 410) << hb.text;
  EXPECT_EQ(hb.body.value("code", ""), error_code::kWorkerFenced) << hb.text;
  EXPECT_EQ(reg("one").status, 410);
  EXPECT_EQ(reg("two").status, 200);
  testing::RawReply bad = testing::Send(
      server.port(), "POST", WorkerPath(testing::kJob, "w", "heartbeat"), R"({"incarnation":5})");
  EXPECT_EQ(bad.status, 400) << bad.text;
}

}  // namespace
}  // namespace khorovod::rendezvous
