// elastic_job.h - khorovodrun's elastic mode (--min-np / --max-np).
//
// The launcher runs the job's rendezvous server in-process (on --hostname,
// an ephemeral port, a fresh random token) and starts -np workers that find
// it through KHOROVOD_RENDEZVOUS_ADDR/TOKEN. When a worker fails, the server
// is told at once (so the survivors re-form without waiting for a heartbeat
// timeout) and a new worker is started in its place, up to --reset-limit
// replacements; the new worker joins at the survivors' next commit. The job
// ends like a static one: 0 when the workers finish successfully.
//
// Thread-safety: run on the main thread; the server runs its own threads.
#pragma once

#include "launch_options.h"
#include "signal_pipe.h"

namespace khorovod::launcher {

int run_elastic_job(const LaunchOptions& options, SignalPipe& signals);

}  // namespace khorovod::launcher
