#include "launcher/ssh_checks.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "launcher/process_group.h"
#include "launcher/worker_env.h"

namespace khorovod::launcher {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kSshAttempts = 5;                   // horovodrun's SSH_ATTEMPTS
constexpr std::time_t kCacheLifetimeS = 60 * 60;  // horovodrun's 60 minutes
constexpr int kSshOwnFailure = 255;

std::string CacheKey(const std::string& host, const SshSettings& ssh) {
  return host + "\t" + std::to_string(ssh.port) + "\t" + ssh.identity_file + "\t" + ssh.program;
}

std::vector<std::string> SplitWords(const std::string& text, char separator) {
  std::vector<std::string> words;
  std::string word;
  std::istringstream in(text);
  while (std::getline(in, word, separator)) {
    if (!word.empty()) words.push_back(word);
  }
  return words;
}

// `text` split at every `separator`, empty fields kept.
std::vector<std::string> SplitFields(const std::string& text, char separator) {
  std::vector<std::string> fields(1);
  for (char c : text) {
    if (c == separator) {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

// Cache lines: <unix time>\t<key (4 tab-separated fields)>\t<interfaces, comma-separated>.
std::map<std::string, std::pair<std::time_t, std::string>> ReadCache(const std::string& path) {
  std::map<std::string, std::pair<std::time_t, std::string>> entries;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const std::vector<std::string> fields = SplitFields(line, '\t');
    if (fields.size() != 6) continue;
    const std::string key = fields[1] + "\t" + fields[2] + "\t" + fields[3] + "\t" + fields[4];
    entries[key] = {static_cast<std::time_t>(std::atoll(fields[0].c_str())), fields[5]};
  }
  return entries;
}

void WriteCache(const std::string& path,
                const std::map<std::string, std::pair<std::time_t, std::string>>& entries) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    for (const auto& [key, entry] : entries)
      out << entry.first << '\t' << key << '\t' << entry.second << '\n';
    if (!out) return;
  }
  std::filesystem::rename(temporary, path, ec);
  if (ec) std::filesystem::remove(temporary, ec);
}

// One host's ssh tries.
struct HostCheck {
  std::string host;
  int attempts = 0;
  bool running = false;
  bool done = false;
  int exit_code = 0;
  std::string out;
  std::string err;
  WorkerPipes pipes;
};

void Drain(UniqueFd& fd, std::string& into) {
  char buffer[4096];
  while (fd) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n > 0) {
      into.append(buffer, static_cast<std::size_t>(n));
    } else if (n < 0 && (errno == EINTR)) {
      continue;
    } else {
      if (n == 0) fd.reset();
      return;  // EOF, EAGAIN or an error
    }
  }
}

std::string TimeoutMessage(const std::vector<HostCheck>& checks, std::chrono::seconds timeout) {
  std::string pending;
  for (const HostCheck& c : checks) {
    if (!c.done) pending += (pending.empty() ? "" : ", ") + c.host;
  }
  return "Timed out waiting for ssh to " + pending +
         ". Please check connectivity between servers. You may need to increase the "
         "--start-timeout "
         "parameter if you have too many servers. Timeout after " +
         std::to_string(timeout.count()) + " seconds.";
}

// Runs every check to completion or to the deadline.
Status RunChecks(std::vector<HostCheck>& checks, const SshCheckOptions& options) {
  const Clock::time_point deadline = Clock::now() + options.start_timeout;
  ProcessGroup group;  // its destructor kills what the deadline left running
  auto start = [&](std::size_t index) -> Status {
    SshSettings ssh = options.ssh;
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline - Clock::now());
    ssh.connect_timeout = std::max(std::chrono::seconds(1), left);
    HostCheck& c = checks[index];
    c.out.clear();
    c.err.clear();
    const WorkerSpec spec{static_cast<int>(index),
                          SshArgv(ssh, c.host, "ls /sys/class/net", false),
                          CurrentEnvironment(),
                          {}};
    StatusOr<WorkerPipes> spawned = group.Spawn(spec);
    if (!spawned.ok()) {
      return Status::Unavailable("cannot run ssh (KHOROVOD_SSH='" + options.ssh.program +
                                 "'): " + spawned.status().message());
    }
    c.pipes = std::move(*spawned);
    c.running = true;
    ++c.attempts;
    return Status::Ok();
  };
  for (std::size_t i = 0; i < checks.size(); ++i) KH_RETURN_IF_ERROR(start(i));
  for (;;) {
    std::vector<pollfd> fds;
    for (HostCheck& c : checks) {
      for (UniqueFd* fd : {&c.pipes.stdout_read, &c.pipes.stderr_read}) {
        if (*fd) fds.push_back(pollfd{fd->get(), POLLIN, 0});
      }
    }
    ::poll(fds.data(), fds.size(), 20);
    for (HostCheck& c : checks) {
      Drain(c.pipes.stdout_read, c.out);
      Drain(c.pipes.stderr_read, c.err);
    }
    for (const WorkerExit& exit : group.PollExits()) {
      HostCheck& c = checks[static_cast<std::size_t>(exit.rank)];
      Drain(c.pipes.stdout_read, c.out);
      Drain(c.pipes.stderr_read, c.err);
      c.pipes = WorkerPipes{};
      c.running = false;
      c.exit_code = exit.status.ShellCode();
      const bool retry =
          c.exit_code == kSshOwnFailure && c.attempts < kSshAttempts && Clock::now() < deadline;
      if (retry) {
        KH_RETURN_IF_ERROR(start(static_cast<std::size_t>(exit.rank)));
      } else {
        c.done = true;
      }
    }
    group.ReapExited();
    if (std::all_of(checks.begin(), checks.end(), [](const HostCheck& c) { return c.done; }))
      return Status::Ok();
    if (Clock::now() >= deadline) {
      group.SignalRunning(SIGKILL);
      return Status::DeadlineExceeded(TimeoutMessage(checks, options.start_timeout));
    }
  }
}

}  // namespace

std::string DefaultSshCheckCachePath() {
  const char* home = std::getenv("HOME");
  return home && *home ? std::string(home) + "/.khorovod/ssh-checks" : std::string();
}

StatusOr<HostInterfaces> CheckRemoteHosts(const std::vector<std::string>& hosts,
                                          const SshCheckOptions& options, std::ostream& err) {
  const bool cached = options.use_cache && !options.cache_path.empty();
  auto cache = cached ? ReadCache(options.cache_path) : decltype(ReadCache("")){};
  const std::time_t now = std::time(nullptr);
  HostInterfaces found;
  std::vector<HostCheck> checks;
  for (const std::string& host : hosts) {
    const auto hit = cache.find(CacheKey(host, options.ssh));
    if (hit != cache.end() && now - hit->second.first < kCacheLifetimeS &&
        now >= hit->second.first) {
      found[host] = SplitWords(hit->second.second, ',');
    } else if (found.count(host) == 0) {
      checks.emplace_back().host = host;
    }
  }
  if (checks.empty()) return found;
  KH_RETURN_IF_ERROR(RunChecks(checks, options));
  bool all_ok = true;
  for (const HostCheck& c : checks) {
    if (c.exit_code != 0) {
      err << "ssh not successful for host " << c.host << ":\n" << c.err << c.out << std::flush;
      all_ok = false;
      continue;
    }
    found[c.host] = SplitWords(c.out, '\n');
    std::string joined;
    for (const std::string& name : found[c.host]) joined += (joined.empty() ? "" : ",") + name;
    if (options.ssh.identity_file.find('\t') == std::string::npos)
      cache[CacheKey(c.host, options.ssh)] = {now, joined};
  }
  if (!all_ok) return Status::Unavailable("could not connect to some hosts via ssh");
  if (cached) WriteCache(options.cache_path, cache);
  return found;
}

}  // namespace khorovod::launcher
