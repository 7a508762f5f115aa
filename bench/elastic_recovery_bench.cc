// khorovod-bench-elastic - recovery and join time of an elastic job.
//
//   khorovod-bench-elastic [--trials 20] [--np 4] [--step-ms 5] [--timeout-s 600]
//
// Runs `khorovodrun -np N --min-np N-1 --max-np N` over this same binary in
// its worker role (see elastic_recovery_worker.h), which SIGKILLs one worker
// per trial. khorovodrun replaces each victim, so every trial also times one
// join. Prints, over the trials:
//   recovery: the victim's SIGKILL to the end of the first successful
//             allreduce of the next generation on every survivor;
//   join:     a replacement's process start (main) to the end of its first
//             allreduce;
// each as median, p95 (nearest rank), min and max, with a breakdown of where
// the time goes. The driver is single-threaded; it bounds the job with
// --timeout-s and kills khorovodrun's process group past it.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "elastic_recovery_worker.h"

namespace {

using Ns = int64_t;

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
    ::closedir(d);
  }
  return names;
}

std::vector<Ns> ReadNumbers(const std::string& path) {
  std::ifstream in(path);
  std::vector<Ns> v;
  for (Ns x; in >> x;) v.push_back(x);
  return v;
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

struct Summary {
  double median_ms, p95_ms, min_ms, max_ms;
};

Summary Summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  const std::size_t n = ms.size();
  const std::size_t p95 = std::min(n - 1, static_cast<std::size_t>((95 * n + 99) / 100) - 1);
  const double median = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
  return {median, ms[p95], ms.front(), ms.back()};
}

void PrintRow(const char* what, const std::vector<double>& ms) {
  if (ms.empty()) {
    std::printf("%-34s %5s\n", what, "none");
    return;
  }
  const Summary s = Summarize(ms);
  std::printf("%-34s %5zu %9.1f %9.1f %9.1f %9.1f\n", what, ms.size(), s.median_ms, s.p95_ms,
              s.min_ms, s.max_ms);
}

double Ms(Ns ns) { return static_cast<double>(ns) / 1e6; }

std::string SelfPath() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  return std::string(buf, static_cast<std::size_t>(n));
}

// Runs argv with stdout and stderr into `log`; returns its exit code, or -1
// if it ran past `timeout` (its process group is then killed).
int RunBounded(const std::vector<std::string>& argv, const std::string& log,
               std::chrono::seconds timeout) {
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::setpgid(0, 0);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::_Exit(127);
  }
  ::setpgid(pid, pid);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(-pid, SIGTERM);
      std::this_thread::sleep_for(std::chrono::seconds(3));
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    // Polling the child of a benchmark driver; no test synchronises on this.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void PrintTail(const std::string& path, std::size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);) all.push_back(l);
  for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    std::fprintf(stderr, "  %s\n", all[i].c_str());
  }
}

int Report(const std::string& dir, int trials) {
  std::map<int, Ns> kills;
  struct Recover {
    Ns failed = 0, reset = 0, first = 0;
  };
  std::map<int, std::vector<Recover>> recovers;
  std::vector<double> join_total, join_init, join_wait;
  for (const auto& name : ListDir(dir)) {
    const auto v = ReadNumbers(dir + "/" + name);
    if (StartsWith(name, "kill.") && v.size() == 1) {
      kills[std::stoi(name.substr(5))] = v[0];
    } else if (StartsWith(name, "recover.") && v.size() == 3) {
      recovers[std::stoi(name.substr(8))].push_back({v[0], v[1], v[2]});
    } else if (StartsWith(name, "join.") && v.size() == 4) {
      join_total.push_back(Ms(v[3] - v[1]));
      join_init.push_back(Ms(v[2] - v[1]));
      join_wait.push_back(Ms(v[3] - v[2]));
    }
  }
  std::vector<double> total, detect, reform, first;
  for (const auto& [t, kill] : kills) {
    auto it = recovers.find(t);
    if (it == recovers.end()) continue;
    Ns last_failed = 0, last_reset = 0, last_first = 0;
    for (const auto& r : it->second) {
      last_failed = std::max(last_failed, r.failed);
      last_reset = std::max(last_reset, r.reset);
      last_first = std::max(last_first, r.first);
    }
    total.push_back(Ms(last_first - kill));
    detect.push_back(Ms(last_failed - kill));
    reform.push_back(Ms(last_reset - last_failed));
    first.push_back(Ms(last_first - last_reset));
  }
  std::printf("%-34s %5s %9s %9s %9s %9s\n", "# ms", "n", "median", "p95", "min", "max");
  PrintRow("recovery (kill -> 1st allreduce)", total);
  PrintRow("  kill -> collective failed", detect);
  PrintRow("  failed -> reset() done", reform);
  PrintRow("  reset() -> sync + 1st allreduce", first);
  PrintRow("join (start -> 1st allreduce)", join_total);
  PrintRow("  start -> init() done", join_init);
  PrintRow("  init() -> 1st allreduce", join_wait);
  if (static_cast<int>(total.size()) < trials) {
    std::fprintf(stderr, "only %zu of %d trials have a complete record\n", total.size(), trials);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Elastic recovery and join time (see the header of elastic_recovery_bench.cc)"};
  int trials = 20, np = 4, step_ms = 5, timeout_s = 600;
  std::string khorovodrun, worker_dir, keep_dir;
  app.add_option("--trials", trials, "workers to kill")->check(CLI::Range(1, 1000));
  app.add_option("--np", np, "workers (max-np; min-np is one less)")->check(CLI::Range(3, 16));
  app.add_option("--step-ms", step_ms, "simulated compute per step")->check(CLI::Range(0, 1000));
  app.add_option("--timeout-s", timeout_s, "bound on the whole job")->check(CLI::Range(10, 7200));
  app.add_option("--khorovodrun", khorovodrun, "launcher (default: next to this binary)");
  app.add_option("--dir", keep_dir, "keep the timestamp files in this (existing) directory");
  app.add_option("--worker-dir", worker_dir, "internal: run as a worker writing here")->group("");
  bool trace = false;
  app.add_flag("--trace", trace, "workers log every step to khorovodrun.log");
  CLI11_PARSE(app, argc, argv);

  if (!worker_dir.empty()) {
    khorovod::bench::RecoveryWorkerOptions o;
    o.dir = worker_dir;
    o.trials = trials;
    o.full_size = np;
    o.step_ms = step_ms;
    o.trace = trace;
    return khorovod::bench::run_recovery_worker(o);
  }

  const std::string self = SelfPath();
  if (khorovodrun.empty()) khorovodrun = self.substr(0, self.rfind('/') + 1) + "khorovodrun";
  if (::access(khorovodrun.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "cannot run %s; pass --khorovodrun\n", khorovodrun.c_str());
    return 2;
  }
  std::string dir = keep_dir;
  if (dir.empty()) {
    char tmpl[] = "/tmp/khorovod-bench-elastic-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      std::perror("mkdtemp");
      return 2;
    }
    dir = tmpl;
  }
  std::vector<std::string> cmd = {khorovodrun,
                                  "-np",
                                  std::to_string(np),
                                  "--min-np",
                                  std::to_string(np - 1),
                                  "--max-np",
                                  std::to_string(np),
                                  "--reset-limit",
                                  std::to_string(trials + 5),
                                  self,
                                  "--worker-dir",
                                  dir,
                                  "--trials",
                                  std::to_string(trials),
                                  "--np",
                                  std::to_string(np),
                                  "--step-ms",
                                  std::to_string(step_ms)};
  if (trace) cmd.push_back("--trace");
  std::printf("# khorovod-bench-elastic: %d trials, %d workers (min %d), step %d ms\n", trials, np,
              np - 1, step_ms);
  const std::string log = dir + "/khorovodrun.log";
  const int rc = RunBounded(cmd, log, std::chrono::seconds(timeout_s));
  if (rc != 0) {
    std::fprintf(stderr, "khorovodrun %s (log %s); its last lines:\n",
                 rc < 0 ? "ran past --timeout-s" : ("exited " + std::to_string(rc)).c_str(),
                 log.c_str());
    PrintTail(log, 20);
  }
  const int report = Report(dir, trials);
  if (keep_dir.empty() && rc == 0 && report == 0) {
    for (const auto& name : ListDir(dir)) {
      if (name != "." && name != "..") ::unlink((dir + "/" + name).c_str());
    }
    ::rmdir(dir.c_str());
  }
  return rc != 0 ? 1 : report;
}
