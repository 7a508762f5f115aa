// Ssh checks: horovodrun's start-up check of remote hosts: before any
// worker starts, every remote host must accept ssh (horovod/runner/launch.py,
// _check_all_hosts_ssh_successful).
//
// Contract of CheckRemoteHosts(hosts, options, err):
//  * Runs `ssh host ls /sys/class/net` on every host at once, up to 5 tries
//    per host (ssh's own failures, exit 255, are retried while time is left),
//    all within options.start_timeout (--start-timeout): past it every ssh
//    still running is SIGKILLed and the call returns kDeadlineExceeded with
//    horovodrun's "Timed out waiting for ... --start-timeout ..." message.
//  * A host whose tries all failed gets horovodrun's "ssh not successful for
//    host H:" and ssh's output on `err`; the call then returns kUnavailable
//    "could not connect to some hosts via ssh".
//  * On success it returns each host's network interface names (the check's
//    output), used to pick --network-interface(s) common to all hosts.
//  * Successes are cached, as horovodrun's (~/.horovod, 60 minutes), in
//    options.cache_path for 60 minutes, keyed by host, port, identity file and
//    ssh program; a cached host is not checked again. options.use_cache false
//    (--disable-cache) neither reads nor writes the cache. Failures are never
//    cached. An unreadable or unwritable cache is ignored.
//
// Thread-safety: call from one thread (it forks and waits for its children).
#pragma once

#include <chrono>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "khorovod/status.h"
#include "launcher/ssh_command.h"

namespace khorovod::launcher {

struct SshCheckOptions {
  SshSettings ssh;
  std::chrono::seconds start_timeout{30};
  bool use_cache = true;
  std::string cache_path;  // empty: no cache
};

// Host name -> its network interfaces.
using HostInterfaces = std::map<std::string, std::vector<std::string>>;

StatusOr<HostInterfaces> CheckRemoteHosts(const std::vector<std::string>& hosts,
                                          const SshCheckOptions& options, std::ostream& err);

// $HOME/.khorovod/ssh-checks, or "" without HOME.
std::string DefaultSshCheckCachePath();

}  // namespace khorovod::launcher
