// Ssh command: how khorovodrun starts a worker on a remote host over ssh,
// as horovodrun does (horovod/runner/util/remote.py, gloo_run.py).
//
// A remote worker is a local `ssh` process; the launcher supervises it like
// any worker (its exit is the worker's exit, signals go to it). ssh runs
// with horovodrun's options (no password prompts, unknown host keys
// accepted) plus keep-alives, so a host whose ssh dies is noticed within
// about 20 s instead of at the TCP timeout.
//
// The worker's environment (the launcher's exportable variables, -x ones,
// HOROVOD_*/KHOROVOD_* placement and the job's rendezvous token) does NOT go
// on the ssh command line, where `ps` on either machine would show it to
// every user: it is written to ssh's stdin. The command line carries only a
// short bootstrap (RemoteWorkerLaunch::command) that reads those lines up to
// a random marker line and evaluates them. They then, on the remote host:
//   * export every variable, change to the launcher's working directory
//     (horovodrun's `cd {pwd}`; a failure is reported and the worker starts
//     in the login directory, as horovodrun),
//   * start a watcher that waits for ssh's stdin to close (ssh killed, the
//     launcher gone, or the connection lost) and then SIGTERMs the worker's
//     process group, SIGKILLing it after the grace period, so no remote
//     worker outlives its ssh (sshd does not signal a command without a tty),
//   * exec the program with stdin from /dev/null.
// The remote login shell must be POSIX-like (sh, bash, dash, zsh, ksh).
//
// Thread-safety: pure functions.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace khorovod::launcher {

struct SshSettings {
  // KHOROVOD_SSH: the ssh client to run (default `ssh` from PATH), e.g. a
  // wrapper that adds `-F config`.
  std::string program = "ssh";
  int port = 0;               // -p/--ssh-port; 0: ssh's own default
  std::string identity_file;  // -i/--ssh-identity-file; empty: ssh's defaults
  // ssh's ConnectTimeout (the checks use what is left of --start-timeout).
  std::chrono::seconds connect_timeout{30};
};

// argv of `ssh [options] host remote_command`. `keepalive` adds the
// ServerAlive options of long-running worker sessions.
std::vector<std::string> SshArgv(const SshSettings& settings, const std::string& host,
                                 const std::string& remote_command, bool keepalive);

struct RemoteLaunch {
  std::string command;        // the remote command line (no secrets)
  std::string stdin_payload;  // written to ssh's stdin, which stays open
};

// `env` is the worker's complete environment ("NAME=VALUE"); variables that
// are not exportable (IsExportable) or not shell names are dropped. `marker`
// ends the payload: a random token that no value contains as a whole line.
RemoteLaunch RemoteWorkerLaunch(const std::vector<std::string>& env, const std::string& cwd,
                                const std::vector<std::string>& argv,
                                std::chrono::milliseconds grace, const std::string& marker);

// Horovod's env_util.is_exportable: not BASH_FUNC_*, OLDPWD or
// *CUDA_VISIBLE_DEVICES (a remote host's devices are its own).
bool IsExportable(const std::string& name);

// `text` as one POSIX shell word ('...' with embedded quotes escaped).
std::string ShellQuote(const std::string& text);

}  // namespace khorovod::launcher
