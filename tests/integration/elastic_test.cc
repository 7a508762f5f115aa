// Elastic training end to end: real worker processes, a real
// khorovod-rendezvous server, and the C++ elastic State/run API. Workers are
// killed, added, and the server is restarted mid-run; afterwards every
// survivor must hold exactly the parameters that applying each step once
// produces (no lost commit, no step applied twice), which also means they
// agree bit for bit.
#include "khorovod/elastic.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "multiproc.h"
#include "rendezvous_process.h"

namespace khorovod::testing {
namespace {

constexpr int kParams = 32;

// Integer-valued and identical on every rank, so the average over any world
// size is exact and the trajectory does not depend on membership.
double Gradient(int64_t step, int j) {
  return static_cast<double>(((step + 1) * 7 + j * 3) % 13 - 6);
}

std::vector<double> Reference(int64_t steps) {
  std::vector<double> p(kParams, 0.0);
  for (int64_t s = 0; s < steps; ++s) {
    for (int j = 0; j < kParams; ++j) p[j] -= 0.5 * Gradient(s, j);
  }
  return p;
}

struct Scenario {
  std::string name;
  int workers;                 // processes started (late ones included)
  std::set<int> late;          // worker indices started mid-run
  std::set<int> victim_ranks;  // ranks (in the first generation) that SIGKILL themselves
  int64_t kill_step = 15;
  bool restart_server = false;      // the parent restarts the server mid-run
  int final_size;                   // world size the job must reach before stopping
  std::set<int> leaver_ranks = {};  // ranks that shut down gracefully at kill_step
  bool add_when_killed = false;     // late workers start when the victim dies
  // Ranks that get SIGTERM at the start of step kill_step (as an eviction
  // sends it): they leave at that step's commit, and the survivors re-form
  // without rolling back (no step runs twice).
  std::set<int> term_ranks = {};
  // Ranks that stop (SIGSTOP) after the commit of kill_step for longer than
  // the heartbeat timeout, as a node cut off by a network partition, and
  // then resume: the rendezvous fenced them, so they must end with
  // worker_fenced instead of rejoining.
  std::set<int> zombie_ranks = {};
};

// Stops this process for `seconds`; a forked helper resumes it.
void StopFor(int seconds) {
  const pid_t self = getpid();
  if (fork() == 0) {
    sleep(static_cast<unsigned>(seconds));
    kill(self, SIGCONT);
    _exit(0);
  }
  raise(SIGSTOP);
}

std::string Marker(const std::string& dir, const std::string& what) { return dir + "/" + what; }

void Touch(const std::string& path) { std::ofstream(path) << "1\n"; }

class ElasticTest : public ::testing::TestWithParam<Scenario> {};

TEST_P(ElasticTest, SurvivorsResumeFromTheLastCommitAndAgree) {
  const Scenario sc = GetParam();
  RendezvousProcess server("elastic-test",
                           {"--min-workers", "2", "--max-workers", "4", "--settle-ms", "300",
                            "--heartbeat-timeout-ms", "1500", "--reform-timeout-ms", "5000"});
  ASSERT_TRUE(server.ok()) << server.error();
  const std::string dir =
      ::testing::TempDir() + "/elastic-" + sc.name + "-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);

  RankOptions opts;
  opts.deadline = std::chrono::seconds(120);
  opts.init = false;
  opts.env = server.WorkerEnv("elastic-test", 4);
  // Indices of killed workers are only known by rank, so any worker may die.
  for (int i = 0; i < sc.workers; ++i) {
    if (!sc.victim_ranks.empty()) opts.may_be_killed.insert(i);
  }
  for (int i = 0; i < sc.workers; ++i) {
    if (!sc.term_ranks.empty()) opts.may_be_killed.insert(i);
  }
  opts.expected_deaths = static_cast<int>(sc.victim_ranks.size() + sc.term_ranks.size());
  for (int i : sc.late) opts.start_when_file_exists[i] = Marker(dir, "add-worker");
  if (sc.restart_server) {
    opts.parent_trigger_file = Marker(dir, "restart-server");
    opts.on_parent_trigger = [&server] { server.Restart(); };
  }

  KH_RUN_RANKS(
      sc.workers,
      [&](Runtime& rt, const RankContext& ctx) {
        ASSERT_TRUE(rt.init(ctx.config).ok());
        std::vector<double> params(kParams, 0.0);
        elastic::State state(rt);
        state.add_tensor("params", TensorView{params.data(), DataType::kFloat64, {kParams}, {}});
        int64_t& step = state.counter("step");
        int resets = 0;
        state.on_reset([&resets] { ++resets; });
        const bool first_generation_victim =
            sc.victim_ranks.count(rt.rank()) > 0 && !sc.late.count(ctx.rank);
        const bool first_generation_leaver =
            sc.leaver_ranks.count(rt.rank()) > 0 && !sc.late.count(ctx.rank);
        const bool first_generation_term =
            sc.term_ranks.count(rt.rank()) > 0 && !sc.late.count(ctx.rank);
        const bool zombie = sc.zombie_ranks.count(rt.rank()) > 0;
        bool left = false;
        int64_t steps_run = 0;  // steps started, rolled-back ones included
        Status s = elastic::run(rt, state, [&]() -> Status {
          while (true) {
            // At the start of a step, before its allreduce: a worker that left
            // at once would fail this step on every survivor (a rollback); one
            // that leaves at the commit lets the step finish.
            if (first_generation_term && step + 1 == sc.kill_step) {
              raise(SIGTERM);
              std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the step's compute
            }
            std::vector<double> g(kParams);
            for (int j = 0; j < kParams; ++j) g[j] = Gradient(step, j);
            TensorView gv{g.data(), DataType::kFloat64, {kParams}, {}};
            ++steps_run;  // attempted: a step cut short and run again counts twice
            KH_RETURN_IF_ERROR(rt.allreduce("grad", gv, gv));
            for (int j = 0; j < kParams; ++j) params[j] -= 0.5 * g[j];
            ++step;
            KH_RETURN_IF_ERROR(state.commit());
            if (first_generation_victim && step == sc.kill_step) {
              if (sc.add_when_killed) Touch(Marker(dir, "add-worker"));
              raise(SIGKILL);
            }
            if (zombie && step == sc.kill_step) StopFor(5);  // heartbeat timeout 1.5 s
            if (first_generation_leaver && step == sc.kill_step) {
              left = true;
              return rt.shutdown();
            }
            if (rt.rank() == 0 && step == 10) {
              if (!sc.late.empty() && !sc.add_when_killed) Touch(Marker(dir, "add-worker"));
              if (sc.restart_server) Touch(Marker(dir, "restart-server"));
            }
            // Stop on events, never on time: the restart must have been noticed
            // (every worker re-forms together, so `resets` agrees across ranks).
            const bool events_done = !sc.restart_server || resets >= 1;
            if (step >= 30 && rt.size() == sc.final_size && events_done) return Status::Ok();
            if (step >= 20000)
              return Status::Internal("the world never reached size " +
                                      std::to_string(sc.final_size));
          }
        });
        if (zombie) {
          // Fenced while the others train (worker_fenced), or, when they finished
          // training while it was stopped, sent away like a late joiner; either
          // way it was not let back in under its old identity.
          EXPECT_TRUE(s.code() == StatusCode::kFailedPrecondition ||
                      s.code() == StatusCode::kJobFinished)
              << s;
          EXPECT_NE(s.message().find("was declared lost"), std::string::npos) << s;
          return;
        }
        ASSERT_TRUE(s.ok()) << s;
        if (left) {
          // The leaver's state is that of its last commit.
          EXPECT_EQ(params, Reference(step));
          return;
        }
        EXPECT_EQ(rt.size(), sc.final_size);
        // Every scenario changes the membership once, so every original worker
        // re-formed at least once (a newcomer starts in the new generation).
        if (!sc.late.count(ctx.rank)) {
          EXPECT_GE(resets, 1);
        }
        EXPECT_EQ(params, Reference(step)) << "step " << step;
        if (!sc.term_ranks.empty()) {
          EXPECT_EQ(steps_run, step) << "a graceful leave rolls nothing back";
        }
        EXPECT_TRUE(rt.shutdown().ok());
      },
      opts);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, ElasticTest,
    ::testing::Values(Scenario{"kill_rank_2", 3, {}, {2}, 15, false, 2},
                      Scenario{"kill_rank_0", 3, {}, {0}, 15, false, 2},
                      Scenario{"kill_two_at_once", 4, {}, {1, 3}, 15, false, 2},
                      Scenario{"add_a_worker", 3, {2}, {}, 15, false, 3},
                      Scenario{"restart_the_server", 2, {}, {}, 15, true, 2},
                      Scenario{"remove_one_gracefully", 3, {}, {}, 15, false, 2, {1}},
                      Scenario{"drop_below_min_and_come_back", 3, {2}, {1}, 15, false, 2, {}, true},
                      Scenario{
                          "sigterm_leaves_at_a_commit", 3, {}, {}, 15, false, 2, {}, false, {1}},
                      Scenario{"a_zombie_back_from_a_partition_is_fenced",
                               3,
                               {},
                               {},
                               15,
                               false,
                               2,
                               {},
                               false,
                               {},
                               {2}}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace khorovod::testing
