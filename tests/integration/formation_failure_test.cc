// Failures while a generation forms send the survivors back to the
// rendezvous for the next generation; they never end the job. Real worker
// processes and a real khorovod-rendezvous server; the failing peer is a
// forked process that takes a place in the generation and vanishes before
// connecting (a newcomer dying during its join).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "multiproc.h"
#include "rendezvous_client.h"
#include "rendezvous_process.h"

namespace khorovod::testing {
namespace {

// Registers as a worker, waits for its place in a generation and exits
// without connecting to its peers. Runs in a forked child; never returns.
[[noreturn]] void VanishAfterAssignment(const RendezvousProcess& server, const std::string& job) {
  rendezvous::HttpEndpoint endpoint;
  endpoint.port = std::stoi(server.address().substr(server.address().rfind(':') + 1));
  endpoint.token = server.token();
  rendezvous::RendezvousClient client(endpoint, job,
                                      rendezvous::WorkerIdentity{"vanishing", "127.0.0.1", 1});
  if (!client.Register().ok()) _exit(2);
  auto generation = client.WaitForNextGeneration(std::chrono::seconds(30));
  _exit(generation.ok() ? 0 : 3);
}

struct FormationCase {
  std::string name;
  int survivors;
};

void PrintTo(const FormationCase& c, std::ostream* os) { *os << c.survivors << " survivors"; }

class FormationFailureTest : public ::testing::TestWithParam<FormationCase> {};

TEST_P(FormationFailureTest, APeerVanishingBeforeItConnectsSendsSurvivorsToTheNextGeneration) {
  const FormationCase c = GetParam();
  const std::string job = "formation-" + c.name;
  // The generation waits (settle) for the vanishing worker to be admitted
  // with the survivors; its silence removes it after the heartbeat timeout.
  RendezvousProcess server(job, {"--min-workers", std::to_string(c.survivors), "--max-workers",
                                 std::to_string(c.survivors + 1), "--settle-ms", "1500",
                                 "--heartbeat-timeout-ms", "1500", "--reform-timeout-ms", "3000"});
  ASSERT_TRUE(server.ok()) << server.error();
  const pid_t vanishing = fork();
  ASSERT_GE(vanishing, 0);
  if (vanishing == 0) VanishAfterAssignment(server, job);

  RankOptions opts;
  opts.deadline = std::chrono::seconds(90);
  opts.init = false;
  opts.env = server.WorkerEnv(job, c.survivors + 1);
  KH_RUN_RANKS(
      c.survivors,
      [&](Runtime& rt, const RankContext& ctx) {
        // The first generation includes the vanishing worker: connecting to it
        // fails, and init must still succeed in the generation after.
        Status s = rt.init(ctx.config);
        ASSERT_TRUE(s.ok()) << s.ToString();
        ASSERT_EQ(rt.size(), c.survivors);
        int32_t value = rt.rank() + 1;
        TensorView v{&value, DataType::kInt32, {1}, {}};
        s = rt.allreduce("after-formation-failure", v, v, {ReduceOp::kSum});
        ASSERT_TRUE(s.ok()) << s.ToString();
        EXPECT_EQ(value, c.survivors * (c.survivors + 1) / 2);
        ASSERT_TRUE(rt.shutdown().ok());
      },
      opts);

  int status = 0;
  ASSERT_EQ(waitpid(vanishing, &status, 0), vanishing);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the vanishing worker was never admitted";
}

INSTANTIATE_TEST_SUITE_P(Sizes, FormationFailureTest,
                         ::testing::Values(FormationCase{"two", 2}, FormationCase{"three", 3}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace khorovod::testing
