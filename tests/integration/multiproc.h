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
  // Initialize the runtime before calling body (false: body gets an
  // uninitialized runtime and the rank's Config in `config`).
  bool init = true;
  // Ranks the test expects to die by a signal (peer-failure tests).
  std::set<int> expect_killed;
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

#define KH_RUN_RANKS(...)                                           \
  do {                                                              \
    std::string kh_failures_ = ::khorovod::testing::RunRanks(__VA_ARGS__); \
    EXPECT_EQ(kh_failures_, "");                                    \
  } while (0)
