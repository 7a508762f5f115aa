// RuntimeImpl: see core/runtime_impl.h.
#include "core/runtime_impl.h"

#include <gloo/context.h>
#include <pthread.h>

#include <csignal>
#include <cstdio>

#include "backend/gloo/gloo_control_channel.h"
#include "backend/registry.h"
#include "common/enforce.h"
#include "core/background_loop.h"

namespace khorovod {
namespace {

using Clock = std::chrono::steady_clock;

// How long a caller blocked on a result spins before it sleeps (when the
// SpinPolicy allows spinning at all).
constexpr auto kWaitSpin = std::chrono::microseconds(100);

constexpr const char* kNotInitialized = "khorovod is not initialized; call init() first";

// Gloo writes to sockets without MSG_NOSIGNAL, so a peer that dies mid-send
// would kill this process with SIGPIPE instead of surfacing as kUnavailable.
// A handler the program installed itself is left alone.
void IgnoreSigpipe() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
}

// "{rank}" in KHOROVOD_TIMELINE becomes the rank; without it only rank 0
// writes (as Horovod does), so local workers do not clobber one file.
std::string TimelinePath(const std::string& pattern, int rank) {
  const std::string token = "{rank}";
  const size_t at = pattern.find(token);
  if (at == std::string::npos) return rank == 0 ? pattern : std::string();
  return pattern.substr(0, at) + std::to_string(rank) + pattern.substr(at + token.size());
}

// What a dead, vanished or outdated peer does to a forming generation.
bool FormationFailure(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded;
}

}  // namespace

Status RuntimeImpl::Init(const Config& config) {
  IgnoreSigpipe();
  {
    ReaderLock lock(mu_);
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

Status RuntimeImpl::Reset() {
  if (!rendezvous_) return Status::FailedPrecondition(kNotInitialized);
  // A static job cannot re-form: return the rendezvous's explanation and
  // keep the running session instead of tearing it down.
  if (!rendezvous_->elastic()) return rendezvous_->NextGeneration(generation_).status();
  KH_RETURN_IF_ERROR(Shutdown());
  return JoinNextGeneration();
}

// Waits for the next generation and starts a session in it. In an elastic
// job a failure while the generation forms is no reason for this worker to
// stop: it goes back to the rendezvous and joins the generation after, for
// up to the elastic timeout. What ends a job is the rendezvous server's
// verdict (its reset limit, or fewer than min workers for longer than the
// elastic timeout), which NextGeneration returns.
Status RuntimeImpl::JoinNextGeneration() {
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
      return Status(s.code(),
                    s.message() +
                        " (still failing to form a generation after the elastic timeout, " +
                        std::to_string(base_config_.elastic_timeout.count()) + " ms)");
    }
  }
}

// Starts a session in `assignment`'s generation.
Status RuntimeImpl::EnterGeneration(const Assignment& assignment) {
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

// The metrics and their endpoint live as long as the Runtime: created at
// the first init(), kept across generations and re-inits.
Status RuntimeImpl::StartObservability(const Config& config) {
  // Kept across generations and re-inits, like the metrics; stopped
  // until KHOROVOD_TIMELINE or start_timeline starts it.
  if (!timeline_) timeline_ = std::make_unique<Timeline>("khorovod " + config.worker_name);
  metrics_->Configure(config.baseline_samples_per_second, config.fusion_threshold_bytes);
  if (config.metrics_port > 0 && !endpoint_) {
    auto endpoint = std::make_unique<metrics::MetricsEndpoint>(
        metrics::EndpointOptions{config.metrics_host, config.metrics_port, 1},
        [metrics = metrics_.get()] { return metrics->Render(); });
    if (Status s = endpoint->Start(); !s.ok())
      return Status::Unavailable("KHOROVOD_METRICS_PORT: " + s.message());
    endpoint_ = std::move(endpoint);
  }
  return Status::Ok();
}

Status RuntimeImpl::StartSession(const Config& config, const Assignment& assignment) {
  WriterLock lock(mu_);
  if (session_) return Status::Ok();
  auto s = std::make_unique<Session>();
  s->config = config;
  s->topology = config;
  if (config.local_ranks_by_node && rendezvous_->elastic()) s->topology = assignment.by_node;
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
  s->executor =
      std::make_unique<Executor>(config, config.fusion_threshold_bytes, s->backend.get(),
                                 s->device.get(), &s->queue, metrics_.get(), timeline_.get());
  s->metrics = metrics_.get();
  s->timeline = timeline_.get();
  s->sets = std::make_shared<ProcessSetTable>(config.rank, config.size);
  s->set_comms =
      std::make_unique<ProcessSetComms>(ProcessSetCommInit{&s->config, s->context, s->channel.get(),
                                                           &s->queue, s->metrics, s->timeline},
                                        s->sets);
  Session* raw = s.get();
  s->thread = std::thread([raw] { RunBackgroundLoop(*raw); });
  // Named for top -H, perf and gdb (at most 15 characters), here rather
  // than in the thread so that the name is set once init() returns.
  pthread_setname_np(s->thread.native_handle(), "khorovod-bg");
  session_ = std::move(s);
  return Status::Ok();
}

Status RuntimeImpl::Finish() {
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

Status RuntimeImpl::Shutdown() {
  std::unique_ptr<Session> s;
  {
    WriterLock lock(mu_);
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

bool RuntimeImpl::initialized() const {
  ReaderLock lock(mu_);
  return session_ != nullptr;
}

Topology RuntimeImpl::topology() const {
  ReaderLock lock(mu_);
  if (!session_) return Placement{-1, -1, -1, -1, -1, -1};
  return session_->topology;
}

Handle RuntimeImpl::Submit(std::vector<PendingOp> ops) {
  ReaderLock lock(mu_);
  if (!session_) return Handle(Completion::Failed(Status::FailedPrecondition(kNotInitialized)));
  for (const PendingOp& op : ops) {
    if (Status s = CheckDevice(op); !s.ok()) return Handle(Completion::Failed(s));
    if (Status s = CheckProcessSet(op); !s.ok()) return Handle(Completion::Failed(s));
  }
  auto completion = std::make_shared<Completion>(static_cast<int>(ops.size()));
  if (session_->metrics) completion->SetWaitSink(session_->metrics->blocked_ns());
  completion->SetWaiterBoard(session_->queue.waiters());
  completion->SetSpin(session_->spin.Budget(kWaitSpin));
  const auto now = Clock::now();
  for (PendingOp& op : ops) {
    op.request.rank = session_->config.rank;
    op.completion = completion;
    op.submitted = now;
  }
  Status s = session_->queue.Push(std::move(ops));
  if (!s.ok()) return Handle(Completion::Failed(s));
  return Handle(completion);
}

Status RuntimeImpl::CheckRoot(int root) const {
  ReaderLock lock(mu_);
  if (session_ && (root < 0 || root >= session_->config.size)) {
    return Status::InvalidArgument("root rank " + std::to_string(root) + " outside [0, " +
                                   std::to_string(session_->config.size) + ")");
  }
  return Status::Ok();
}

Status RuntimeImpl::StartTimeline(const std::string& pattern, bool mark_cycles) {
  const int rank = topology().rank;
  if (rank < 0) return Status::FailedPrecondition(kNotInitialized);
  if (pattern.empty()) return Status::InvalidArgument("start_timeline needs a file path");
  const std::string path = TimelinePath(pattern, rank);
  if (path.empty()) return Status::Ok();
  return timeline_->Start(path, mark_cycles);
}

Status RuntimeImpl::StopTimeline() {
  if (!initialized()) return Status::FailedPrecondition(kNotInitialized);
  timeline_->Stop();
  return Status::Ok();
}

std::shared_ptr<const ProcessSetTable> RuntimeImpl::process_sets() const {
  ReaderLock lock(mu_);
  return session_ ? session_->sets : nullptr;
}

std::shared_ptr<WaiterBoard> RuntimeImpl::waiters() const {
  ReaderLock lock(mu_);
  return session_ ? session_->queue.waiters() : nullptr;
}

// An operation on a process set: this rank a member, a host tensor, a
// broadcast root in the set.
Status RuntimeImpl::CheckProcessSet(const PendingOp& op) const {
  const Request& q = op.request;
  if (q.process_set == 0) return Status::Ok();
  const std::string what(OpTypeName(q.op));
  if (q.device.kind != DeviceKind::kCPU) {
    return Status::InvalidArgument(
        what + " '" + q.name + "': process sets other than the global one take host tensors only");
  }
  return session_->sets->CheckSubmit(q.process_set, what.c_str(), q.name,
                                     q.op == OpType::kBroadcast ? &q.root : nullptr);
}

// A device tensor must be on the device this rank's runtime is pinned to
// (and an allreduce's output on its input's device).
Status RuntimeImpl::CheckDevice(const PendingOp& op) const {
  const Device& in = op.input.device;
  if (op.request.op == OpType::kAllreduce && !(op.output.device == in)) {
    return Status::InvalidArgument("allreduce '" + op.request.name + "': output on " +
                                   DeviceName(op.output.device) + " but input on " +
                                   DeviceName(in));
  }
  if (in.kind == DeviceKind::kCPU) return Status::Ok();
  StatusOr<Device> pinned = session_->device->Pinned();
  if (!pinned.ok()) {
    return Status(pinned.status().code(), OpTypeName(op.request.op).data() + std::string(" '") +
                                              op.request.name + "': " + pinned.status().message());
  }
  if (!(in == *pinned)) {
    return Status::InvalidArgument(
        std::string(OpTypeName(op.request.op)) + " '" + op.request.name + "': tensor on " +
        DeviceName(in) + ", but this rank's runtime uses " + DeviceName(*pinned) +
        " (KHOROVOD_GPU_DEVICE, else local rank modulo the visible devices)");
  }
  return Status::Ok();
}

}  // namespace khorovod
