// RuntimeImpl: a process's sessions (one per generation) and the background
// thread that paces negotiation rounds and executes them; and the Runtime's
// lifecycle calls. The collectives' argument checks are core/runtime_ops.cc.
#include "khorovod/runtime.h"

#include <gloo/context.h>

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <csignal>
#include <shared_mutex>
#include <thread>

#include "backend/gloo/gloo_control_channel.h"
#include "backend/registry.h"
#include "bootstrap/gloo_bootstrap.h"
#include "bootstrap/rendezvous.h"
#include "common/enforce.h"
#include "backend/device_backend.h"
#include "core/negotiator.h"
#include "core/executor.h"
#include "core/process_set_comm.h"
#include "core/process_set_table.h"
#include "core/runtime_submit.h"
#include "core/tensor_queue.h"
#include "core/waiter_signal.h"
#include "khorovod/metrics/http_endpoint.h"
#include "observability/timeline.h"
#include "observability/worker_metrics.h"

namespace khorovod {
namespace {

using Clock = std::chrono::steady_clock;

// How long an idle rank waits for local work before joining a round anyway;
// it bounds how long a busy peer waits for an idle one.
constexpr auto kIdleWait = std::chrono::milliseconds(5);

// After a round that did work, the next submission usually follows within
// microseconds; spinning that long avoids a costly sleep and wake-up (when
// the SpinPolicy allows spinning at all).
constexpr auto kBusySpin = std::chrono::microseconds(200);

// How long a caller blocked on a result spins before it sleeps (same rule).
constexpr auto kWaitSpin = std::chrono::microseconds(100);

// Work arriving after an idle spell usually comes in a burst (a backward
// pass submitting one gradient after another). The round waits until
// submissions have paused for kBurstQuiet, or at most one cycle time, so
// the burst is negotiated and fused in one round, while a lone operation
// waits only kBurstQuiet instead of a whole cycle. A user thread that
// blocks on a result ends the burst at once: it will submit nothing more
// until this round completes its operation.
constexpr auto kBurstQuiet = std::chrono::microseconds(100);

void WaitForBurstToEnd(const TensorQueue& queue, std::chrono::microseconds cycle_time) {
  const auto start = Clock::now();
  const auto quiet = std::min<std::chrono::microseconds>(kBurstQuiet, cycle_time);
  uint64_t seen = queue.submissions();
  auto last_arrival = start;
  for (auto now = start; now - start < cycle_time; now = Clock::now()) {
    if (queue.waiters()->load(std::memory_order_acquire) > 0) return;
    if (const uint64_t n = queue.submissions(); n != seen) {
      seen = n;
      last_arrival = now;
    } else if (now - last_arrival >= quiet) {
      return;
    }
    std::this_thread::yield();
  }
}

// Gloo writes to sockets without MSG_NOSIGNAL, so a peer that dies mid-send
// would kill this process with SIGPIPE instead of surfacing as kUnavailable.
// A handler the program installed itself is left alone.
void IgnoreSigpipe() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
}

}  // namespace

// Everything that exists between init() and shutdown().
struct Session {
  Config config;
  // Whether this session's waits spin before sleeping (core/waiter_signal.h).
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

// "{rank}" in KHOROVOD_TIMELINE becomes the rank; without it only rank 0
// writes (as Horovod does), so local workers do not clobber one file.
std::string TimelinePath(const std::string& pattern, int rank) {
  const std::string token = "{rank}";
  const size_t at = pattern.find(token);
  if (at == std::string::npos) return rank == 0 ? pattern : std::string();
  return pattern.substr(0, at) + std::to_string(rank) + pattern.substr(at + token.size());
}

class RuntimeImpl {
 public:
  ~RuntimeImpl() { (void)Finish(); }

  Status Init(const Config& config) {
    IgnoreSigpipe();
    {
      std::shared_lock lock(mu_);
      if (session_) return Status::Ok();
    }
    KH_RETURN_IF_ERROR(config.Validate());
    base_config_ = config;
    KH_RETURN_IF_ERROR(StartObservability(config));
    if (config.elastic()) {
      auto rdzv = MakeHttpRendezvous(config);
      if (!rdzv.ok()) return rdzv.status();
      rendezvous_ = std::move(*rdzv);
    } else {
      rendezvous_ = MakeStaticRendezvous();
      // init() -> shutdown() -> init() in a static job (Horovod's
      // test_horovod_reinit) connects again through the same file store,
      // which still holds the first connection's keys: every rank counts
      // its static inits in lockstep, so the n-th init uses keys of its own.
      // The count is this runtime's (it outlives shutdown), not the
      // process's: in-process test worlds hold one runtime per rank.
      const int64_t n = static_inits_++;
      if (n > 0) base_config_.job_id += "/reinit-" + std::to_string(n);
    }
    return JoinNextGeneration();
  }

  Status Reset() {
    if (!rendezvous_) return Status::FailedPrecondition("khorovod is not initialized; call init() first");
    // A static job cannot re-form: return the rendezvous's explanation and
    // keep the running session instead of tearing it down.
    if (!rendezvous_->elastic()) return rendezvous_->NextGeneration(generation_).status();
    KH_RETURN_IF_ERROR(Shutdown());
    return JoinNextGeneration();
  }

  // Waits for the next generation and starts a session in it. In an elastic
  // job a failure while the generation forms (a peer refused the connection,
  // never connected, died or was replaced by a newer generation) is no
  // reason for this worker to stop: it goes back to the rendezvous and joins
  // the generation after, for up to the elastic timeout. What ends a job is
  // the rendezvous server's verdict (its reset limit, or fewer than min
  // workers for longer than the elastic timeout), which NextGeneration returns.
  Status JoinNextGeneration() {
    const auto give_up = Clock::now() + base_config_.elastic_timeout;
    for (;;) {
      auto assignment = rendezvous_->NextGeneration(generation_);
      if (!assignment.ok()) return assignment.status();
      Status s = EnterGeneration(*assignment);
      if (s.ok() || !rendezvous_->elastic() || !FormationFailure(s)) return s;
      // One line per failed formation: what a user reads to see why a
      // re-formation took longer than usual.
      std::fprintf(stderr, "khorovod elastic: %s; back to the rendezvous\n", s.message().c_str());
      if (Clock::now() >= give_up) {
        return Status(s.code(), s.message() + " (still failing to form a generation after the elastic timeout, " +
                                    std::to_string(base_config_.elastic_timeout.count()) + " ms)");
      }
    }
  }

  // What a dead, vanished or outdated peer does to a forming generation.
  static bool FormationFailure(const Status& s) {
    return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded;
  }

  // Starts a session in `assignment`'s generation.
  Status EnterGeneration(const Assignment& assignment) {
    Config config = base_config_;
    if (rendezvous_->elastic()) {
      static_cast<Placement&>(config) = assignment;
      // Keys of different generations never mix.
      config.job_id = base_config_.job_id + "/generation-" + std::to_string(assignment.generation);
    }
    generation_ = assignment.generation;
    // The timeline needs the first generation's rank to pick its file.
    if (!timeline_opened_ && !base_config_.timeline_path.empty()) {
      timeline_opened_ = true;
      const std::string path = TimelinePath(base_config_.timeline_path, config.rank);
      if (Status st = path.empty() ? Status::Ok() : timeline_->Start(path); !st.ok()) {
        return Status(st.code(), "KHOROVOD_TIMELINE: " + st.message());
      }
    }
    KH_RETURN_IF_ERROR(StartSession(config, assignment));
    metrics_->SetTopology(config.rank, config.size, generation_);
    return Status::Ok();
  }

  // The metrics registry and endpoint live as long as the Runtime: created
  // at the first init(), kept across generations and re-inits.
  Status StartObservability(const Config& config) {
    // Kept across generations and re-inits, like the metrics; stopped
    // until KHOROVOD_TIMELINE or start_timeline starts it.
    if (!timeline_) timeline_ = std::make_unique<Timeline>("khorovod " + config.worker_name);
    metrics_->Configure(config.baseline_samples_per_second, config.fusion_threshold_bytes);
    if (config.metrics_port > 0 && !endpoint_) {
      auto endpoint = std::make_unique<metrics::MetricsEndpoint>(
          metrics::EndpointOptions{config.metrics_host, config.metrics_port, 1},
          [metrics = metrics_.get()] { return metrics->Render(); });
      if (Status s = endpoint->Start(); !s.ok()) return Status::Unavailable("KHOROVOD_METRICS_PORT: " + s.message());
      endpoint_ = std::move(endpoint);
    }
    return Status::Ok();
  }

  WorkerMetrics& metrics() { return *metrics_; }
  void MarkTrainingFinished() { training_finished_ = true; }

  bool MembershipChanged() const { return rendezvous_ && rendezvous_->MembershipChanged(); }
  void AtCommitBoundary() {
    if (rendezvous_) rendezvous_->AtCommitBoundary();
  }

  Status StartSession(const Config& config, const Assignment& assignment) {
    std::unique_lock lock(mu_);
    if (session_) return Status::Ok();
    auto s = std::make_unique<Session>();
    s->config = config;
    // The process's device tensors live on the GPU it was pinned to in an
    // earlier generation; a new local rank must not move it elsewhere.
    if (pinned_device_ && s->config.gpu_device < 0) s->config.gpu_device = pinned_device_->index;
    s->spin = SpinPolicy::ForConfig(s->config);
    auto context = rendezvous_->Connect(assignment, config);
    if (!context.ok()) return context.status();
    s->context = *context;
    BackendInit init{&s->config, s->context};
    auto backend = BackendRegistry::Create(config.cpu_backend, init);
    if (!backend.ok()) return backend.status();
    s->backend = std::move(*backend);
    s->device = std::make_unique<DeviceBackend>(&s->config, s->context, std::move(device_legacy_));
    s->channel = s->backend->TakeControlChannel();
    if (!s->channel) s->channel = std::make_unique<GlooControlChannel>(s->context);
    s->negotiator = std::make_unique<Negotiator>(s->config, s->channel.get(), &s->queue);
    s->executor = std::make_unique<Executor>(config.rank, config.size, config.fusion_threshold_bytes,
                                             s->backend.get(), s->device.get(), &s->queue, metrics_.get(),
                                             timeline_.get());
    s->metrics = metrics_.get();
    s->timeline = timeline_.get();
    s->sets = std::make_shared<ProcessSetTable>(config.rank, config.size);
    s->set_comms = std::make_unique<ProcessSetComms>(
        ProcessSetCommInit{&s->config, s->context, s->channel.get(), &s->queue, s->metrics, s->timeline}, s->sets);
    Session* raw = s.get();
    s->thread = std::thread([raw] { BackgroundLoop(*raw); });
    // Named for top -H, perf and gdb (at most 15 characters), here rather
    // than in the thread so that the name is set once init() returns.
    pthread_setname_np(s->thread.native_handle(), "khorovod-bg");
    session_ = std::move(s);
    return Status::Ok();
  }

  // Leaves the job for good (elastic) and ends the session.
  Status Finish() {
    Status s = Shutdown();
    // A worker shed mid-run leaves plainly (the others re-form without it);
    // one whose elastic training loop returned ends the job's formations.
    if (rendezvous_) rendezvous_->Leave(training_finished_);
    training_finished_ = false;
    rendezvous_.reset();
    generation_ = -1;
    pinned_device_.reset();  // a later init() starts from its own config
    device_legacy_.reset();
    if (timeline_) timeline_->Stop();
    return s;
  }

  Status Shutdown() {
    std::unique_ptr<Session> s;
    {
      std::unique_lock lock(mu_);
      s = std::move(session_);
    }
    if (!s) return Status::Ok();
    s->queue.RequestShutdown();
    s->thread.join();
    if (auto d = s->device->resolved()) pinned_device_ = d;
    // Before the session's context goes: NCCL keeps its communicator for
    // the next session to shrink or grow instead of forming anew.
    device_legacy_ = s->device->Retire();
    return Status::Ok();
  }

  bool initialized() const {
    std::shared_lock lock(mu_);
    return session_ != nullptr;
  }

  Topology topology() const {
    std::shared_lock lock(mu_);
    if (!session_) return Placement{-1, -1, -1, -1, -1, -1};
    return session_->config;
  }

  // Validates, builds the Requests and enqueues `ops` as one batch.
  Handle Submit(std::vector<PendingOp> ops) {
    std::shared_lock lock(mu_);
    if (!session_) {
      return Handle(detail::Completion::Failed(
          Status::FailedPrecondition("khorovod is not initialized; call init() first")));
    }
    for (const PendingOp& op : ops) {
      if (Status s = CheckDevice(op); !s.ok()) return Handle(detail::Completion::Failed(s));
      if (Status s = CheckProcessSet(op); !s.ok()) return Handle(detail::Completion::Failed(s));
    }
    auto completion = std::make_shared<detail::Completion>(static_cast<int>(ops.size()));
    if (session_->metrics) completion->SetWaitSink(session_->metrics->blocked_ns());
    completion->SetWaiterCount(session_->queue.waiters());
    completion->SetSpin(session_->spin.Budget(kWaitSpin));
    const auto now = Clock::now();
    for (PendingOp& op : ops) {
      op.request.rank = session_->config.rank;
      op.completion = completion;
      op.submitted = now;
    }
    Status s = session_->queue.Push(std::move(ops));
    if (!s.ok()) return Handle(detail::Completion::Failed(s));
    return Handle(completion);
  }

  Status CheckRoot(int root) const {
    std::shared_lock lock(mu_);
    if (session_ && (root < 0 || root >= session_->config.size)) {
      return Status::InvalidArgument("root rank " + std::to_string(root) + " outside [0, " +
                                     std::to_string(session_->config.size) + ")");
    }
    return Status::Ok();
  }

  // Runtime::start_timeline: the file rule of KHOROVOD_TIMELINE ("{rank}",
  // else rank 0 only), applied with the current rank.
  Status StartTimeline(const std::string& pattern, bool mark_cycles) {
    const int rank = topology().rank;
    if (rank < 0) return Status::FailedPrecondition("khorovod is not initialized; call init() first");
    if (pattern.empty()) return Status::InvalidArgument("start_timeline needs a file path");
    const std::string path = TimelinePath(pattern, rank);
    if (path.empty()) return Status::Ok();
    return timeline_->Start(path, mark_cycles);
  }

  Status StopTimeline() {
    if (!initialized()) return Status::FailedPrecondition("khorovod is not initialized; call init() first");
    timeline_->Stop();
    return Status::Ok();
  }

  std::shared_ptr<const ProcessSetTable> process_sets() const {
    std::shared_lock lock(mu_);
    return session_ ? session_->sets : nullptr;
  }

  std::shared_ptr<std::atomic<int>> waiters() const {
    std::shared_lock lock(mu_);
    return session_ ? session_->queue.waiters() : nullptr;
  }

 private:
  static void BackgroundLoop(Session& s);

  // An operation on a process set: this rank a member, a host tensor, a
  // broadcast root in the set. Caller holds mu_.
  Status CheckProcessSet(const PendingOp& op) const {
    const Request& q = op.request;
    if (q.process_set == 0) return Status::Ok();
    const std::string what(OpTypeName(q.op));
    if (q.device.kind != DeviceKind::kCPU) {
      return Status::InvalidArgument(what + " '" + q.name + "': process sets other than the global one take host tensors only");
    }
    return session_->sets->CheckSubmit(q.process_set, what.c_str(), q.name,
                                       q.op == OpType::kBroadcast ? &q.root : nullptr);
  }

  // A device tensor must be on the device this rank's runtime is pinned to
  // (and an allreduce's output on its input's device). Caller holds mu_.
  Status CheckDevice(const PendingOp& op) const {
    const Device& in = op.input.device;
    if (op.request.op == OpType::kAllreduce && !(op.output.device == in)) {
      return Status::InvalidArgument("allreduce '" + op.request.name + "': output on " +
                                     DeviceName(op.output.device) + " but input on " + DeviceName(in));
    }
    if (in.kind == DeviceKind::kCPU) return Status::Ok();
    StatusOr<Device> pinned = session_->device->Pinned();
    if (!pinned.ok()) {
      return Status(pinned.status().code(), OpTypeName(op.request.op).data() + std::string(" '") +
                                                op.request.name + "': " + pinned.status().message());
    }
    if (!(in == *pinned)) {
      return Status::InvalidArgument(std::string(OpTypeName(op.request.op)) + " '" + op.request.name +
                                     "': tensor on " + DeviceName(in) + ", but this rank's runtime uses " +
                                     DeviceName(*pinned) +
                                     " (KHOROVOD_GPU_DEVICE, else local rank modulo the visible devices)");
    }
    return Status::Ok();
  }

  mutable std::shared_mutex mu_;
  std::unique_ptr<Session> session_;
  // Survive across generations: the worker's identity in the job.
  Config base_config_;
  int64_t static_inits_ = 0;  // static-job Init() calls so far (Init: one caller at a time)
  std::unique_ptr<Rendezvous> rendezvous_;
  int64_t generation_ = -1;
  // The device this process's first session pinned, kept across elastic
  // generations (see StartSession).
  std::optional<Device> pinned_device_;
  // What the last session's device backend retired (NCCL: its communicator),
  // handed to the next session's; dropped by Finish().
  std::shared_ptr<BackendLegacy> device_legacy_;
  // Observability lives as long as the Runtime (sessions hold raw pointers
  // to it; ~RuntimeImpl ends the session in Finish() before members go).
  // The endpoint is declared after the metrics so it stops serving first.
  const std::unique_ptr<WorkerMetrics> metrics_ = std::make_unique<WorkerMetrics>();
  std::unique_ptr<metrics::MetricsEndpoint> endpoint_;
  std::unique_ptr<Timeline> timeline_;
  bool timeline_opened_ = false;
  bool training_finished_ = false;  // elastic::run returned; see MarkTrainingFinished
};

void RuntimeImpl::BackgroundLoop(Session& s) {
  Status fatal;
  bool stall_shutdown = false;
  auto last_start = Clock::now() - s.config.cycle_time;
  try {
    Negotiator::Round round;
    std::vector<PendingOp> drained;
    while (true) {
      auto next_start = last_start + s.config.cycle_time;
      if (!s.negotiator->has_local_work()) {
        s.queue.WaitForWork(Clock::now() + kIdleWait,
                            round.idle ? std::chrono::microseconds(0) : s.spin.Budget(kBusySpin));
        if (s.queue.has_incoming()) WaitForBurstToEnd(s.queue, s.config.cycle_time);
      } else {
        std::this_thread::sleep_until(next_start);
      }
      last_start = Clock::now();
      drained.clear();
      s.queue.PopAll(&drained);
      for (PendingOp& op : drained) s.negotiator->Add(std::move(op));
      fatal = s.negotiator->RunRound(s.queue.shutdown_requested(), last_start, &round);
      if (!fatal.ok()) break;
      if (s.metrics && !round.idle) s.metrics->NegotiationRound(Clock::now() - last_start);
      if (s.timeline && !round.idle) s.timeline->MarkCycle(last_start);
      if (round.shutdown) {
        fatal = Status::Aborted(round.stall_shutdown ? round.shutdown_reason
                                                     : "khorovod was shut down before the operation completed");
        stall_shutdown = round.stall_shutdown;
        break;
      }
      s.executor->CompleteEager(round.eager, *s.negotiator);
      fatal = s.set_comms->Execute(round.responses, *s.executor, *s.negotiator);
      if (!fatal.ok()) break;
    }
  } catch (const std::exception& e) {
    fatal = Status::Internal(std::string("background thread: ") + e.what());
  }
  // After a stall shutdown later calls fail as the pending ones did
  // (kAborted: Python's HorovodInternalError, so elastic run() recovers).
  s.queue.Close(fatal.code() == StatusCode::kAborted && !stall_shutdown
                    ? Status::FailedPrecondition("khorovod was shut down; call init() again")
                    : fatal);
  s.negotiator->FailAll(fatal);
  std::vector<PendingOp> late;
  s.queue.PopAll(&late);
  for (PendingOp& op : late) s.queue.Complete(op, fatal);
  if (fatal.code() != StatusCode::kAborted) {
    // Close every connection now rather than at shutdown: peers blocked on
    // this rank then see EOF at once instead of waiting for their timeout,
    // so one failure reaches every rank quickly.
    s.set_comms->Clear();
    s.executor.reset();
    s.negotiator.reset();
    // Only its backend: user threads may still reach the DeviceBackend
    // object through Submit's device check.
    s.device->Drop(fatal);
    s.backend.reset();
    s.channel.reset();
    s.context.reset();
  }
}

// --- Runtime: lifecycle -------------------------------------------------------

Runtime::Runtime() : impl_(std::make_unique<RuntimeImpl>()) {}
Runtime::~Runtime() = default;

Status Runtime::init(const Config& config) { return impl_->Init(config); }

Status Runtime::init() {
  auto config = Config::FromEnvironment();
  if (!config.ok()) return config.status();
  return impl_->Init(*config);
}

Status Runtime::shutdown() { return impl_->Finish(); }
void Runtime::begin_step() { impl_->metrics().StepBegin(); }
void Runtime::end_step(int64_t samples) { impl_->metrics().StepEnd(samples); }
WorkerMetrics* detail::MetricsOf(Runtime& runtime) { return &runtime.impl_->metrics(); }
void detail::MarkTrainingFinished(Runtime& runtime) { runtime.impl_->MarkTrainingFinished(); }
Status Runtime::reset() { return impl_->Reset(); }
bool Runtime::membership_changed() const { return impl_->MembershipChanged(); }
void Runtime::at_commit_boundary() { impl_->AtCommitBoundary(); }
bool Runtime::is_initialized() const { return impl_->initialized(); }
Status Runtime::start_timeline(const std::string& path, bool mark_cycles) {
  return impl_->StartTimeline(path, mark_cycles);
}
Status Runtime::stop_timeline() { return impl_->StopTimeline(); }
Topology Runtime::topology() const { return impl_->topology(); }
int Runtime::rank() const { return topology().rank; }
int Runtime::size() const { return topology().size; }
int Runtime::local_rank() const { return topology().local_rank; }
int Runtime::local_size() const { return topology().local_size; }
int Runtime::cross_rank() const { return topology().cross_rank; }
int Runtime::cross_size() const { return topology().cross_size; }

namespace detail {
Handle Submit(RuntimeImpl& impl, std::vector<PendingOp> ops) { return impl.Submit(std::move(ops)); }
Status CheckRoot(const RuntimeImpl& impl, int root) { return impl.CheckRoot(root); }
std::shared_ptr<const ProcessSetTable> ProcessSets(const RuntimeImpl& impl) { return impl.process_sets(); }
std::shared_ptr<std::atomic<int>> Waiters(const RuntimeImpl& impl) { return impl.waiters(); }
}  // namespace detail

}  // namespace khorovod
