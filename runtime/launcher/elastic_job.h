// Elastic job: khorovodrun's elastic mode (--min-np / --max-np).
//
// The launcher runs the job's rendezvous server in-process (on --hostname,
// or with remote hosts on an address they reach, remote_hosts.h;
// an ephemeral port, a fresh random token) and starts -np workers that find
// it through KHOROVOD_RENDEZVOUS_ADDR/TOKEN. When a worker fails, the server
// is told at once (so the survivors re-form without waiting for a heartbeat
// timeout) and a new worker is started in its place, up to --reset-limit
// replacements; the new worker joins at the survivors' next commit. The job
// ends like a static one: 0 when the workers finish successfully.
//
// A worker that exits 0 has finished the training loop (with elastic State
// all ranks finish at the same commit), so the job is ending: it is not
// replaced, no worker is started after it, and khorovodrun waits for the
// others (horovodrun and torchrun do not restart successful workers either).
// A failure after that fails the job.
//
// --host-discovery-script (host_discovery.h) replaces the fixed -np: the
// script runs at start and every --discovery-interval-ms; khorovodrun keeps
// min(--max-np, discovered slots) workers, placed on hosts in the order the
// script lists them. Workers on a host that disappears (or beyond a host's
// new slot count, newest first) get SIGTERM (SIGKILL after the grace period)
// and are reported to the server as leaving, so the survivors re-form at
// once; new slots get new workers, which join at the next commit. Remote
// hosts run their workers over ssh (remote_hosts.h): those known at the
// start are checked first (a failing check fails the job), later ones are
// not; a name that does not resolve fails the job at start and is ignored
// (with one message) later; a failing script keeps the last host list. If
// no worker runs for --elastic-timeout, the job fails.
//
// Thread-safety: run on the main thread; the server runs its own threads.
#pragma once

#include "launcher/launch_options.h"
#include "launcher/signal_pipe.h"

namespace khorovod::launcher {

int RunElasticJob(const LaunchOptions& options, SignalPipe& signals);

}  // namespace khorovod::launcher
