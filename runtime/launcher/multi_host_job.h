// Multi host job: a static (non-elastic) khorovodrun job whose -H or
// --hostfile list names remote hosts, as horovodrun's gloo_run runs it.
//
// Ranks are assigned host by host in list order, each host contributing its
// slots until -np ranks exist (horovodrun's get_host_assignments), and every
// worker gets its placement as KHOROVOD_* and HOROVOD_* variables
// (HOROVOD_HOSTNAME is the host's name as listed, KHOROVOD_HOSTNAME the
// address its workers advertise, remote_hosts.h). Peers cannot share a
// directory across machines, so instead of the file store they meet through
// the key-value store (generation 0) of a rendezvous server khorovodrun runs
// on the launcher's address, authenticated by a fresh random token
// (KHOROVOD_STORE_ADDR, KHOROVOD_RENDEZVOUS_TOKEN); the job stays static.
// Workers on remote hosts run through ssh; local ones as usual.
//
// Contract: PrepareMultiHostStaticJob starts the store server and returns it
// with the workers' specs, or an error (kUnavailable: the server could not
// bind). The server must outlive the workers (keep the result until the
// supervisor returns).
//
// Thread-safety: call from the launcher's main thread.
#pragma once

#include <memory>
#include <vector>

#include "khorovod/status.h"
#include "launcher/launch_options.h"
#include "launcher/metrics_ports.h"
#include "launcher/process_group.h"
#include "launcher/remote_hosts.h"
#include "rendezvous/http_server.h"

namespace khorovod::launcher {

struct MultiHostStaticJob {
  std::unique_ptr<rendezvous::RendezvousServer> store;
  std::vector<WorkerSpec> workers;
};

StatusOr<MultiHostStaticJob> PrepareMultiHostStaticJob(const LaunchOptions& options,
                                                       const RemotePlan& plan,
                                                       const MetricsPorts& ports);

}  // namespace khorovod::launcher
