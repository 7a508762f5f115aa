#include "multiproc.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <thread>
#include <vector>

namespace khorovod::testing {
namespace {

std::string MakeStoreDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "khorovod-test-XXXXXX").string();
  char* dir = mkdtemp(tmpl.data());
  return dir ? std::string(dir) : std::string();
}

[[noreturn]] void RunChild(int rank, int size, const std::string& store, const RankBody& body,
                           const RankOptions& options) {
  int code = 0;
  {
    std::map<std::string, std::string> env = options.env;
    if (options.rank_env) options.rank_env(rank, env);
    env["KHOROVOD_RANK"] = std::to_string(rank);
    env["KHOROVOD_SIZE"] = std::to_string(size);
    env["KHOROVOD_STORE_PATH"] = store;
    env.try_emplace("KHOROVOD_TIMEOUT_SECONDS", "20");
    auto config = Config::FromMap(env);
    if (!config.ok()) {
      ADD_FAILURE() << "rank " << rank << ": bad config: " << config.status();
      _exit(3);
    }
    Runtime runtime;
    if (options.init) {
      Status s = runtime.init(*config);
      if (!s.ok()) {
        ADD_FAILURE() << "rank " << rank << ": init failed: " << s;
        _exit(4);
      }
    }
    RankContext ctx{rank, size, *config};
    try {
      body(runtime, ctx);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << rank << ": exception: " << e.what();
    }
    if (::testing::Test::HasFailure()) code = 1;
    Status s = runtime.shutdown();
    if (!s.ok()) code = 5;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(code);
}

}  // namespace

std::string RunRanks(int size, const RankBody& body, const RankOptions& options) {
  const std::string store = MakeStoreDir();
  if (store.empty()) return "mkdtemp failed";
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids(size, -1);
  auto spawn = [&](int rank) {
    pid_t pid = fork();
    if (pid == 0) RunChild(rank, size, store, body, options);
    pids[rank] = pid;
    return pid > 0;
  };
  for (int rank = 0; rank < size; ++rank) {
    if (!options.start_when_file_exists.count(rank) && !spawn(rank)) return "fork failed";
  }
  bool triggered = options.parent_trigger_file.empty();
  std::string failures;
  std::vector<bool> done(size, false);
  int deaths = 0;
  int remaining = size;
  const auto deadline = std::chrono::steady_clock::now() + options.deadline;
  // Bounded reaping loop: poll with WNOHANG, sleeping briefly between polls;
  // the deadline caps it.
  while (remaining > 0) {
    bool progressed = false;
    for (const auto& [rank, file] : options.start_when_file_exists) {
      if (pids[rank] < 0 && std::filesystem::exists(file) && !spawn(rank)) return "fork failed";
    }
    if (!triggered && std::filesystem::exists(options.parent_trigger_file)) {
      triggered = true;
      if (options.on_parent_trigger) options.on_parent_trigger();
    }
    for (int r = 0; r < size; ++r) {
      if (done[r] || pids[r] < 0) continue;
      int status = 0;
      pid_t got = waitpid(pids[r], &status, WNOHANG);
      if (got != pids[r]) continue;
      done[r] = true;
      --remaining;
      progressed = true;
      if (options.expect_killed.count(r) && !WIFSIGNALED(status)) {
        failures += "rank " + std::to_string(r) + " was expected to be killed but exited; ";
      } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        failures +=
            "rank " + std::to_string(r) + " exited " + std::to_string(WEXITSTATUS(status)) + "; ";
      } else if (WIFSIGNALED(status) && options.may_be_killed.count(r)) {
        ++deaths;
      } else if (WIFSIGNALED(status) && !options.expect_killed.count(r)) {
        failures += "rank " + std::to_string(r) + " killed by signal " +
                    std::to_string(WTERMSIG(status)) + "; ";
      }
    }
    if (remaining == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < size; ++r) {
        if (done[r]) continue;
        if (pids[r] < 0) {
          failures += "rank " + std::to_string(r) + " was never started; ";
          continue;
        }
        kill(pids[r], SIGKILL);
        waitpid(pids[r], nullptr, 0);
        failures += "rank " + std::to_string(r) + " did not finish before the deadline; ";
      }
      break;
    }
    if (!progressed) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!options.may_be_killed.empty() && deaths != options.expected_deaths) {
    failures += std::to_string(deaths) + " workers died, expected " +
                std::to_string(options.expected_deaths) + "; ";
  }
  std::error_code ec;
  std::filesystem::remove_all(store, ec);
  return failures;
}

}  // namespace khorovod::testing
