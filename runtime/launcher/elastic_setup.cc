#include "launcher/elastic_setup.h"

#include <variant>

#include "launcher/host_discovery.h"
#include "launcher/remote_hosts.h"

namespace khorovod::launcher {

// The hosts known at the start: -H/--hostfile's, or the discovery script's
// first answer (a failing script is reported by the policy's own first run).
std::vector<std::string> InitialHostNames(const LaunchOptions& opts,
                                          std::chrono::milliseconds script_timeout) {
  if (opts.host_discovery_script.empty()) return HostNamesOf(opts.hosts);
  DiscoveryResult found = RunDiscoveryScript(opts.host_discovery_script, script_timeout, 1);
  std::vector<std::string> names;
  if (auto* hosts = std::get_if<std::vector<DiscoveredHost>>(&found)) {
    for (const DiscoveredHost& h : *hosts) names.push_back(h.name);
  }
  return names;
}

// The job's rendezvous server: on `host` (where every worker's host can
// reach it), an ephemeral port, a fresh random token; with the membership
// policy of the command line.
rendezvous::ServerOptions ServerOptionsFor(const LaunchOptions& opts, const std::string& host,
                                           std::string token, const MetricsPorts& ports) {
  rendezvous::ServerOptions server_options;
  server_options.host = host;
  server_options.port = 0;
  server_options.token = std::move(token);
  auto& service = server_options.service;
  service.job = opts.job_id;
  service.log = false;
  service.policy.min_workers = opts.min_np;
  service.policy.max_workers = opts.max_np;
  // Workers started together register within milliseconds of each other.
  service.policy.settle = std::chrono::milliseconds(500);
  service.policy.heartbeat_timeout = std::chrono::milliseconds(5000);
  service.policy.elastic_timeout = opts.elastic_timeout;
  service.policy.reset_limit = opts.reset_limit;
  // The workers it starts are waited for as horovodrun waits for them: up
  // to the elastic timeout (a loaded machine may take a minute to import
  // a framework); one that dies is reported on its exit at once.
  service.policy.spawn_timeout = opts.elastic_timeout;
  if (ports.enabled()) server_options.metrics_port = ports.server();
  return server_options;
}

}  // namespace khorovod::launcher
