// Elastic setup: what an elastic khorovodrun job starts from, apart from
// its policy: the hosts known at the start, and the options of the job's
// own rendezvous server (membership policy from the command line, a fresh
// token, the metrics port).
//
// Thread-safety: pure functions (InitialHostNames runs the discovery script
// once); safe from any thread.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "launcher/launch_options.h"
#include "launcher/metrics_ports.h"
#include "rendezvous/http_server.h"

namespace khorovod::launcher {

// -H/--hostfile's hosts, or the discovery script's first answer (empty when
// it fails: the policy's own first run reports that).
std::vector<std::string> InitialHostNames(const LaunchOptions& opts,
                                          std::chrono::milliseconds script_timeout);

// The job's rendezvous server: on `host`, an ephemeral port, `token`.
rendezvous::ServerOptions ServerOptionsFor(const LaunchOptions& opts, const std::string& host,
                                           std::string token, const MetricsPorts& ports);

}  // namespace khorovod::launcher
