#include "launcher/host_discovery.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <sstream>

#include "launcher/process_group.h"
#include "launcher/unique_fd.h"

namespace khorovod::launcher {
namespace {

constexpr std::size_t kMaxOutput = 1 << 20;
constexpr long long kMaxSlots = 1000000;

std::string trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  const auto end = s.find_last_not_of(" \t\r");
  return s.substr(begin, end - begin + 1);
}

bool IsLoopbackIpv4(const std::string& host) {
  int octets[4];
  char tail = 0;
  if (std::sscanf(host.c_str(), "%d.%d.%d.%d%c", &octets[0], &octets[1], &octets[2], &octets[3],
                  &tail) != 4) {
    return false;
  }
  for (int o : octets) {
    if (o < 0 || o > 255) return false;
  }
  return octets[0] == 127;
}

}  // namespace

DiscoveryResult ParseDiscoveryOutput(const std::string& text, int default_slots) {
  std::vector<DiscoveredHost> hosts;
  std::istringstream in(text);
  int line_number = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++line_number;
    const std::string line = trim(raw);
    if (line.empty()) continue;
    const auto where = "line " + std::to_string(line_number) + " '" + line + "'";
    const auto colon = line.rfind(':');
    std::string name = colon == std::string::npos ? line : trim(line.substr(0, colon));
    long long slots = default_slots;
    if (colon != std::string::npos) {
      const std::string count = trim(line.substr(colon + 1));
      if (count.empty() || count.size() > 9 ||
          !std::all_of(count.begin(), count.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return where + ": expected host:slots";
      }
      slots = std::stoll(count);
    }
    if (name.empty() || name.find_first_of(" \t,") != std::string::npos) {
      return where + ": expected host:slots";
    }
    if (slots < 1 || slots > kMaxSlots) return where + ": slots must be between 1 and 1000000";
    auto it =
        std::find_if(hosts.begin(), hosts.end(), [&](const auto& h) { return h.name == name; });
    if (it == hosts.end()) {
      hosts.push_back({name, static_cast<int>(slots)});
    } else {
      it->slots = static_cast<int>(std::min<long long>(kMaxSlots, it->slots + slots));
    }
  }
  return hosts;
}

bool IsLocalHost(const std::string& host, const std::string& this_host) {
  return host == "localhost" || IsLoopbackIpv4(host) || (!this_host.empty() && host == this_host);
}

std::string LocalHostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

DiscoveryResult RunDiscoveryScript(const std::string& path, std::chrono::milliseconds timeout,
                                   int default_slots) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  const pid_t pid = ::fork();
  if (pid < 0) return std::string("fork: ") + std::strerror(errno);
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(fds[1], 1);  // dup2 clears O_CLOEXEC on the copy
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::signal(SIGPIPE, SIG_DFL);
    char* argv[] = {const_cast<char*>(path.c_str()), nullptr};
    ::execv(path.c_str(), argv);
    // Only async-signal-safe calls here: report through the exit code.
    ::_exit(errno == ENOENT ? 127 : 126);
  }
  ::setpgid(pid, pid);
  write_end.reset();

  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string output;
  std::string problem;
  for (;;) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      problem = "did not finish within " + std::to_string(timeout.count()) + " ms";
      break;
    }
    pollfd p{read_end.get(), POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), INT_MAX)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // timeout: checked at the top
    char buf[4096];
    const ssize_t n = ::read(read_end.get(), buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;  // EOF: the script (and whatever it started) closed stdout
    output.append(buf, static_cast<std::size_t>(n));
    if (output.size() > kMaxOutput) {
      problem = "printed more than 1 MiB";
      break;
    }
  }
  if (!problem.empty()) ::kill(-pid, SIGKILL);
  // After EOF the script normally exits at once; it is bounded all the same.
  int status = 0;
  pid_t waited = 0;
  while ((waited = ::waitpid(pid, &status, WNOHANG)) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      if (problem.empty())
        problem = "did not exit within " + std::to_string(timeout.count()) + " ms";
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      waited = pid;
      break;
    }
    ::usleep(1000);  // the script closed stdout; its exit is imminent
  }
  if (!problem.empty()) return "discovery script " + path + " " + problem;
  const ExitStatus exit = ExitStatus::FromWaitStatus(status);
  if (!exit.Success()) {
    std::string hint;
    if (!exit.signaled && exit.code == 127) hint = " (not found?)";
    if (!exit.signaled && exit.code == 126) hint = " (not executable?)";
    return "discovery script " + path + " " + exit.Describe() + hint;
  }
  return ParseDiscoveryOutput(output, default_slots);
}

}  // namespace khorovod::launcher
