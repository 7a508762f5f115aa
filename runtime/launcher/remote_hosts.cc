#include "launcher/remote_hosts.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "khorovod/util/random_hex.h"
#include "launcher/host_address.h"
#include "launcher/host_discovery.h"
#include "launcher/ssh_checks.h"

namespace khorovod::launcher {
namespace {

constexpr std::chrono::seconds kDefaultStartTimeout{30};  // horovodrun's
constexpr std::chrono::seconds kResolveRetry{60};

bool IsThisMachine(const std::string& host, const std::vector<std::string>& local_addresses) {
  if (IsLocalHost(host, LocalHostname())) return true;
  StatusOr<std::string> address = ResolveIpv4(host);
  return address.ok() && std::find(local_addresses.begin(), local_addresses.end(), *address) !=
                             local_addresses.end();
}

// --start-timeout, else HOROVOD_START_TIMEOUT, else 30 s (horovodrun's order).
StatusOr<std::chrono::seconds> StartTimeout(const LaunchOptions& options) {
  if (options.start_timeout.count() > 0) return options.start_timeout;
  const char* env = std::getenv("HOROVOD_START_TIMEOUT");
  if (env == nullptr || *env == '\0') return kDefaultStartTimeout;
  char* end = nullptr;
  const long long seconds = std::strtoll(env, &end, 10);
  if (*end != '\0' || seconds < 1 || seconds > 86400LL * 7) {
    return Status::InvalidArgument(std::string("HOROVOD_START_TIMEOUT='") + env +
                                   "': expected seconds, 1..604800");
  }
  return std::chrono::seconds(seconds);
}

// The requested interfaces every host has, in the user's order.
StatusOr<std::vector<std::string>> CommonInterfaces(const std::vector<std::string>& requested,
                                                    const HostInterfaces& remote, bool runs_here) {
  std::vector<std::string> common;
  for (const std::string& name : requested) {
    bool everywhere = !runs_here || InterfaceIpv4(name).ok();
    for (const auto& [host, names] : remote) {
      everywhere = everywhere && std::find(names.begin(), names.end(), name) != names.end();
    }
    if (everywhere) common.push_back(name);
  }
  if (!common.empty()) return common;
  std::string seen;
  for (const auto& [host, names] : remote) {
    seen += "; " + host + ":";
    for (const std::string& n : names) seen += " " + n;
  }
  std::string joined;
  for (const std::string& n : requested) joined += (joined.empty() ? "" : ",") + n;
  return Status::InvalidArgument(
      "--network-interfaces " + joined +
      ": no common interface among the job's hosts (each needs one of them" +
      (runs_here ? ", with an IPv4 address on this machine too" : "") + ")" + seen);
}

StatusOr<std::string> LauncherAddress(const LaunchOptions& options,
                                      const std::vector<std::string>& interfaces,
                                      const std::string& first_remote_address) {
  if (options.hostname != "127.0.0.1") return options.hostname;
  if (!interfaces.empty()) {
    if (StatusOr<std::string> here = InterfaceIpv4(interfaces.front()); here.ok()) return here;
  }
  StatusOr<std::string> routed = RouteSourceAddress(first_remote_address);
  if (!routed.ok()) {
    return Status::InvalidArgument(
        "cannot choose the address remote workers reach khorovodrun on: " +
        routed.status().message() + " (give --hostname ADDRESS)");
  }
  return routed;
}

}  // namespace

std::vector<std::string> HostNamesOf(const std::string& hosts) {
  std::vector<std::string> names;
  std::size_t start = 0;
  while (start < hosts.size()) {
    const std::size_t end = std::min(hosts.find(',', start), hosts.size());
    const std::string entry = hosts.substr(start, end - start);
    const std::string name = entry.substr(0, entry.rfind(':'));
    if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end())
      names.push_back(name);
    start = end + 1;
  }
  return names;
}

std::string RemotePlan::AdvertisedAddress(const std::string& host) const {
  const auto it = address_of_.find(host);
  return it == address_of_.end() ? launcher_address_ : it->second;
}

std::vector<EnvVar> RemotePlan::NetworkVariables() const {
  if (interfaces_.empty()) return {};
  std::string all;
  for (const std::string& name : interfaces_) all += (all.empty() ? "" : ",") + name;
  return {{"KHOROVOD_NETWORK_INTERFACE", interfaces_.front()},
          {"HOROVOD_GLOO_IFACE", interfaces_.front()},
          {"NCCL_SOCKET_IFNAME", all}};
}

Status RemotePlan::AddDiscoveredHost(const std::string& host) {
  if (all_local_ || IsRemote(host) || IsThisMachine(host, LocalIpv4Addresses()))
    return Status::Ok();
  // Discovery runs every tick: a name that did not resolve is not looked up
  // again for a while, so the event loop does not wait on the resolver.
  const auto now = std::chrono::steady_clock::now();
  if (const auto failed = unresolved_.find(host);
      failed != unresolved_.end() && now < failed->second.retry_at) {
    return failed->second.why;
  }
  StatusOr<std::string> address = ResolveIpv4(host);
  if (!address.ok()) {
    unresolved_[host] = Unresolved{now + kResolveRetry, address.status()};
    return address.status();
  }
  unresolved_.erase(host);
  address_of_[host] = *address;
  return Status::Ok();
}

WorkerSpec RemotePlan::RemoteWorker(const WorkerSpec& spec, const std::string& host) const {
  StatusOr<std::string> marker = RandomHex(16);
  const RemoteLaunch launch = RemoteWorkerLaunch(spec.env, cwd_, spec.argv, grace_,
                                                 "KHOROVOD-END-" + (marker.ok() ? *marker : host));
  WorkerSpec remote;
  remote.rank = spec.rank;
  remote.argv = SshArgv(ssh_, host, launch.command, /*keepalive=*/true);
  remote.env = CurrentEnvironment();  // ssh's own
  remote.stdin_data = launch.stdin_payload;
  return remote;
}

StatusOr<RemotePlan> PlanRemoteHosts(const LaunchOptions& options,
                                     const std::vector<std::string>& hosts, std::ostream& err) {
  RemotePlan plan;
  plan.launcher_address_ = options.hostname;
  plan.grace_ = options.grace_period;
  plan.all_local_ = options.hosts_run_locally;
  const char* program = std::getenv("KHOROVOD_SSH");
  plan.ssh_.program = program && *program ? program : "ssh";
  plan.ssh_.port = options.ssh_port;
  plan.ssh_.identity_file = options.ssh_identity_file;
  StatusOr<std::chrono::seconds> timeout = StartTimeout(options);
  if (!timeout.ok()) return timeout.status();
  plan.ssh_.connect_timeout = *timeout;
  char cwd[4096] = {};
  if (::getcwd(cwd, sizeof cwd - 1) == nullptr) return Status::Unavailable("getcwd failed");
  plan.cwd_ = cwd;
  const std::vector<std::string> local_addresses = LocalIpv4Addresses();
  std::vector<std::string> remote;
  bool runs_here = hosts.empty();
  for (const std::string& host : hosts) {
    const bool local = options.hosts_run_locally || IsThisMachine(host, local_addresses);
    runs_here = runs_here || local;
    if (!local && std::find(remote.begin(), remote.end(), host) == remote.end())
      remote.push_back(host);
  }
  if (remote.empty()) {
    if (!options.network_interfaces.empty()) {
      StatusOr<ChosenInterface> chosen = FirstInterfaceWithIpv4(options.network_interfaces);
      if (!chosen.ok())
        return Status::InvalidArgument("--network-interface: " + chosen.status().message());
      plan.interfaces_ = {chosen->name};
    }
    return plan;
  }
  for (const std::string& host : remote) {
    StatusOr<std::string> address = ResolveIpv4(host);
    if (!address.ok()) return address.status();
    plan.address_of_[host] = *address;
  }
  if (!options.ssh_identity_file.empty() &&
      ::access(options.ssh_identity_file.c_str(), R_OK) != 0) {
    return Status::InvalidArgument("--ssh-identity-file " + options.ssh_identity_file +
                                   ": cannot read it");
  }
  SshCheckOptions check{plan.ssh_, *timeout, !options.disable_cache, DefaultSshCheckCachePath()};
  StatusOr<HostInterfaces> checked = CheckRemoteHosts(remote, check, err);
  if (!checked.ok()) return checked.status();
  if (!options.network_interfaces.empty()) {
    StatusOr<std::vector<std::string>> common =
        CommonInterfaces(options.network_interfaces, *checked, runs_here);
    if (!common.ok()) return common.status();
    plan.interfaces_ = std::move(*common);
  }
  StatusOr<std::string> address =
      LauncherAddress(options, plan.interfaces_, plan.address_of_.at(remote.front()));
  if (!address.ok()) return address.status();
  plan.launcher_address_ = *address;
  return plan;
}

}  // namespace khorovod::launcher
