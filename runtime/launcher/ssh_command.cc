#include "launcher/ssh_command.h"

#include <algorithm>

namespace khorovod::launcher {
namespace {

bool IsShellName(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The watcher of the header comment. It ignores SIGTERM itself because the
// worker's group, which it signals, may include it; `kill -0` skips the
// signals when the worker already ended (the session closing is what woke it).
std::string WatcherLines(std::chrono::milliseconds grace) {
  const long long grace_s = std::max<long long>(1, (grace.count() + 999) / 1000);
  return "kh_worker=$$\n"
         "{ trap '' TERM; cat <&3 >/dev/null; kill -0 \"$kh_worker\" 2>/dev/null || exit 0;\n"
         "  kill -TERM -\"$kh_worker\" 2>/dev/null || kill -TERM \"$kh_worker\" 2>/dev/null; "
         "sleep " +
         std::to_string(grace_s) +
         ";\n"
         "  kill -KILL -\"$kh_worker\" 2>/dev/null || kill -KILL \"$kh_worker\" 2>/dev/null; } "
         "</dev/null >/dev/null 2>&1 &\n";
}

}  // namespace

std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

bool IsExportable(const std::string& name) {
  return name.rfind("BASH_FUNC_", 0) != 0 && name != "OLDPWD" &&
         !EndsWith(name, "CUDA_VISIBLE_DEVICES");
}

std::vector<std::string> SshArgv(const SshSettings& settings, const std::string& host,
                                 const std::string& remote_command, bool keepalive) {
  std::vector<std::string> argv = {
      settings.program,
      "-T",  // no tty: the worker's output stays two plain streams
      "-o",
      "BatchMode=yes",
      "-o",
      "PasswordAuthentication=no",
      "-o",
      "StrictHostKeyChecking=no",
      "-o",
      "LogLevel=ERROR",
      "-o",
      "ConnectTimeout=" + std::to_string(settings.connect_timeout.count())};
  if (keepalive) {
    for (const char* option : {"ServerAliveInterval=5", "ServerAliveCountMax=3"}) {
      argv.push_back("-o");
      argv.push_back(option);
    }
  }
  if (settings.port > 0) {
    argv.push_back("-p");
    argv.push_back(std::to_string(settings.port));
  }
  if (!settings.identity_file.empty()) {
    argv.push_back("-i");
    argv.push_back(settings.identity_file);
  }
  argv.push_back("--");
  argv.push_back(host);
  argv.push_back(remote_command);
  return argv;
}

RemoteLaunch RemoteWorkerLaunch(const std::vector<std::string>& env, const std::string& cwd,
                                const std::vector<std::string>& argv,
                                std::chrono::milliseconds grace, const std::string& marker) {
  std::string payload = "exec 3<&0\n";
  for (const std::string& entry : env) {
    const std::size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = entry.substr(0, eq);
    if (!IsShellName(name) || !IsExportable(name)) continue;
    // Appended piece by piece: GCC 12 at -O3 reports a false -Wrestrict on
    // `"literal" + std::string&&` (README command 1 builds Release).
    payload.append("export ")
        .append(name)
        .append("=")
        .append(ShellQuote(entry.substr(eq + 1)))
        .append("\n");
  }
  const std::string quoted_cwd = ShellQuote(cwd);
  payload.append("cd ")
      .append(quoted_cwd)
      .append(" >/dev/null 2>&1 || echo \"khorovodrun: cannot change to ");
  payload.append(quoted_cwd).append(" on $(hostname); the worker starts in $(pwd)\" >&2\n");
  payload += WatcherLines(grace);
  payload += "exec";
  for (const std::string& arg : argv) payload.append(" ").append(ShellQuote(arg));
  payload += " </dev/null 3<&-\n" + marker + "\n";
  // sed stops at the marker line, so the remote shell never waits for ssh's
  // stdin to close before it starts the worker.
  const std::string command = "sh -c 'eval \"$(sed -n \"/^" + marker + "$/q;p\")\"'";
  return RemoteLaunch{command, payload};
}

}  // namespace khorovod::launcher
