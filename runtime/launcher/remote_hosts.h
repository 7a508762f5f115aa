// Remote hosts: running a job's workers on other machines over ssh, as
// horovodrun does: which hosts are remote, the start-up checks, the
// addresses everybody meets on, and each remote worker's ssh command.
//
// A host is local when it names this machine: localhost, 127.0.0.0/8, this
// machine's hostname, or a name resolving to an address of one of its
// interfaces (horovodrun's filter_local_addresses). --run-hosts-locally makes
// every host local. Every other host is remote.
//
// Contract of PlanRemoteHosts(options, hosts, err) (called before any worker
// starts; it forks ssh and may take up to --start-timeout):
//  * with no remote host: a plan that runs everything here (launcher address
//    --hostname); --network-interface(s) must then name an interface here;
//  * otherwise: resolves every remote host to its IPv4 address (the address
//    its workers advertise to their peers), checks ssh to all of them within
//    --start-timeout (ssh_checks.h), picks the first --network-interface(s)
//    every host has (remote hosts per the check, this machine when it runs
//    workers too), and the launcher's address, which the rendezvous server
//    binds and local workers advertise: --hostname when given (not
//    127.0.0.1), else the chosen interface's address here, else the address
//    this machine routes to the first remote host from.
// Errors (kInvalidArgument, kUnavailable, kDeadlineExceeded) carry the
// message khorovodrun prints before exiting 2.
//
// RemoteWorker(spec, host) turns a worker that would run here into one that
// runs on remote `host` through ssh (ssh_command.h): same program, working
// directory and environment, the environment passed on ssh's stdin.
//
// Thread-safety: a RemotePlan is immutable after PlanRemoteHosts.
#pragma once

#include <chrono>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "khorovod/status.h"
#include "launcher/launch_options.h"
#include "launcher/process_group.h"
#include "launcher/ssh_command.h"
#include "launcher/worker_env.h"

namespace khorovod::launcher {

class RemotePlan {
 public:
  bool HasRemoteHosts() const { return !address_of_.empty(); }
  bool IsRemote(const std::string& host) const { return address_of_.count(host) > 0; }
  // The address workers on `host` advertise: a remote host's IPv4 address,
  // the launcher's address for this machine.
  std::string AdvertisedAddress(const std::string& host) const;
  const std::string& LauncherAddress() const { return launcher_address_; }
  // KHOROVOD_NETWORK_INTERFACE, HOROVOD_GLOO_IFACE (the chosen interface)
  // and NCCL_SOCKET_IFNAME (every requested one all hosts have), as
  // horovodrun's gloo_run; none without --network-interface(s).
  std::vector<EnvVar> NetworkVariables() const;
  // A host that appeared after the start (elastic host discovery): a remote
  // one is resolved and recorded, without an ssh check (a host that refuses
  // ssh fails its workers, and is blacklisted like any failing host).
  // kInvalidArgument when it does not resolve (then for a minute without
  // asking the resolver again).
  Status AddDiscoveredHost(const std::string& host);
  // See the header comment; `spec.env` is the worker's complete environment.
  WorkerSpec RemoteWorker(const WorkerSpec& spec, const std::string& host) const;

 private:
  friend StatusOr<RemotePlan> PlanRemoteHosts(const LaunchOptions&, const std::vector<std::string>&,
                                              std::ostream&);
  std::string launcher_address_;
  std::map<std::string, std::string> address_of_;  // remote host -> IPv4
  std::vector<std::string> interfaces_;            // usable --network-interface(s), preferred first
  SshSettings ssh_;
  std::string cwd_;
  std::chrono::milliseconds grace_{3000};
  bool all_local_ = false;  // --run-hosts-locally
  struct Unresolved {
    std::chrono::steady_clock::time_point retry_at;
    Status why;
  };
  std::map<std::string, Unresolved> unresolved_;  // discovered names that did not resolve
};

StatusOr<RemotePlan> PlanRemoteHosts(const LaunchOptions& options,
                                     const std::vector<std::string>& hosts, std::ostream& err);

// The host names of a -H / --hostfile list ("a:2,b" -> a, b), in order.
std::vector<std::string> HostNamesOf(const std::string& hosts);

}  // namespace khorovod::launcher
