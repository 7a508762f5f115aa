// Session: everything a Runtime has between joining a generation and
// leaving it (init() to shutdown() in a static job; one elastic generation):
// the Gloo context, the backends, the negotiation's channel and queue, the
// executor and the process sets. RuntimeImpl (core/runtime_impl.h) builds
// one per generation; its background thread (core/background_loop.h) runs
// the rounds over it.
//
// Destruction order is the members' reverse order: the executor, process
// set comms and device backend go before the context they use.
//
// Thread-safety: the background thread owns what it runs (negotiator,
// executor, set_comms); user threads reach `queue`, `sets`, `device`
// (its device check) and `config` through RuntimeImpl under its lock.
#pragma once

#include <memory>
#include <thread>

#include "backend/backend.h"
#include "backend/control_channel.h"
#include "backend/device_backend.h"
#include "common/waiter_signal.h"
#include "core/executor.h"
#include "core/negotiator.h"
#include "core/process_set_comm.h"
#include "core/process_set_table.h"
#include "core/tensor_queue.h"
#include "khorovod/config.h"
#include "observability/timeline.h"
#include "observability/worker_metrics.h"

namespace gloo {
class Context;
}

namespace khorovod {

struct Session {
  Config config;
  // The placement the API reports (Runtime::topology): config's, or with
  // KHOROVOD_LOCAL_RANKS=node in an elastic job the rendezvous's count by
  // node. The backends use config's: only one host's ranks share memory.
  Placement topology;
  // Whether this session's waits spin before sleeping (common/waiter_signal.h).
  SpinPolicy spin;
  std::shared_ptr<gloo::Context> context;
  std::unique_ptr<Backend> backend;
  // Created with the session, but its backend only at the first device
  // response; destroyed before the context it may use.
  std::unique_ptr<DeviceBackend> device;
  std::unique_ptr<ControlChannel> channel;  // the backend's, else Gloo's
  TensorQueue queue;
  std::unique_ptr<Negotiator> negotiator;
  std::unique_ptr<Executor> executor;
  // Process sets: the table every thread reads, and the comms of the sets
  // this rank is a member of (background thread only; destroyed before the
  // queue and context they use).
  std::shared_ptr<ProcessSetTable> sets;
  std::unique_ptr<ProcessSetComms> set_comms;
  Timeline* timeline = nullptr;
  WorkerMetrics* metrics = nullptr;  // owned by RuntimeImpl, outlives the session
  std::thread thread;
};

}  // namespace khorovod
