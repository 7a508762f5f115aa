// Fork-based multi-process test harness.
//
// RunRanks(n, body) forks n processes that each initialize a khorovod
// Runtime over loopback (file-store rendezvous in a fresh temp directory)
// and run body(runtime). GoogleTest assertions inside the body work: each
// child exits non-zero if any assertion failed, and the parent reports which
// ranks failed. Every run is bounded by a deadline after which all children
// are SIGKILLed and the test fails, so a hang can never stall the suite.
//
// Call RunRanks from the test's main thread before creating any threads
// (fork copies only the calling thread).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "khorovod/runtime.h"

namespace khorovod::testing {

struct RankOptions {
  std::chrono::seconds deadline{90};
  // Extra KHOROVOD_* settings applied to every rank's Config.
  std::map<std::string, std::string> env;
  // Per-rank settings on top of `env` (e.g. a simulated host placement:
  // KHOROVOD_LOCAL_RANK, KHOROVOD_CROSS_RANK, ...).
  std::function<void(int rank, std::map<std::string, std::string>& env)> rank_env;
  // Initialize the runtime before calling body (false: body gets an
  // uninitialized runtime and the rank's Config in `config`).
  bool init = true;
  // Ranks the test expects to die by a signal (peer-failure tests).
  std::set<int> expect_killed;
  // Elastic tests know victims by rank, not by process: any of these may
  // die by a signal, and exactly `expected_deaths` of them must.
  std::set<int> may_be_killed;
  int expected_deaths = 0;
  // Ranks forked only once the named file exists (workers joining mid-run).
  std::map<int, std::string> start_when_file_exists;
  // Called in the parent when this file appears (e.g. restart a server).
  std::string parent_trigger_file;
  std::function<void()> on_parent_trigger;
};

struct RankContext {
  int rank;
  int size;
  Config config;
};

using RankBody = std::function<void(Runtime& runtime, const RankContext& ctx)>;

// Returns a description of the failures, empty when every rank passed.
std::string RunRanks(int size, const RankBody& body, const RankOptions& options = {});

}  // namespace khorovod::testing

#define KH_RUN_RANKS(...)                                                  \
  do {                                                                     \
    std::string kh_failures_ = ::khorovod::testing::RunRanks(__VA_ARGS__); \
    EXPECT_EQ(kh_failures_, "");                                           \
  } while (0)
