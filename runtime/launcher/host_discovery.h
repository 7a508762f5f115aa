// Host discovery: horovodrun's --host-discovery-script, for khorovodrun.
//
// The script is an executable that prints the hosts available now, one per
// line, as `host:slots` (or `host`, meaning one slot); blank lines are
// skipped and a host listed twice has its slots added. khorovodrun runs it at
// start and then every --discovery-interval-ms, and adds or removes workers
// to match (see elastic_job.h).
//
// IsLocalHost() names the hosts that are this machine without asking the
// resolver: `localhost`, an address in 127.0.0.0/8, or this machine's
// hostname. Other hosts run their workers over ssh (remote_hosts.h).
//
// Contract of RunDiscoveryScript(): it never blocks longer than `timeout`
// (the script's process group is SIGKILLed past it), returns the script's
// stdout when it exits 0, and an error naming the cause otherwise (not
// executable, non-zero exit, killed, timed out, output over 1 MiB). The
// script's stderr goes to the launcher's stderr.
//
// Thread-safety: free functions without shared state; run_discovery_script
// forks, so call it from one thread at a time (the launcher's main thread).
#pragma once

#include <chrono>
#include <string>
#include <variant>
#include <vector>

namespace khorovod::launcher {

struct DiscoveredHost {
  std::string name;
  int slots = 1;
  bool operator==(const DiscoveredHost&) const = default;
};

// Hosts in first-appearance order, or an error message.
using DiscoveryResult = std::variant<std::vector<DiscoveredHost>, std::string>;

// Parses the script's output (see above). Slot counts must be 1..1000000.
// A line without slots gets `default_slots` (--slots-per-host; Horovod's meaning).
DiscoveryResult ParseDiscoveryOutput(const std::string& text, int default_slots = 1);

// True for hosts whose workers can run here (see above). `this_host` is this
// machine's hostname (gethostname()).
bool IsLocalHost(const std::string& host, const std::string& this_host);

// This machine's hostname, or "" if it cannot be read.
std::string LocalHostname();

// Runs the script (argv[0] = `path`, no arguments) and parses its output.
DiscoveryResult RunDiscoveryScript(const std::string& path, std::chrono::milliseconds timeout,
                                   int default_slots = 1);

}  // namespace khorovod::launcher
