#include "service.h"

#include <algorithm>
#include <cstdio>

#include "khorovod/util/base64.h"
#include "khorovod/util/random_hex.h"
#include "protocol.h"

namespace khorovod::rendezvous {
namespace {

using nlohmann::json;

std::string NewServerId() {
  StatusOr<std::string> id = RandomHex(16);
  if (id.ok()) return *id;
  // Without a random source the start time still tells restarts apart.
  return std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
}

json WorldJson(const World& w) {
  json members = json::array();
  for (const Assignment& a : w.members) {
    members.push_back({{"name", a.name},
                       {"address", a.address},
                       {"slots", a.slots},
                       {"rank", a.rank},
                       {"local_rank", a.local_rank},
                       {"local_size", a.local_size},
                       {"cross_rank", a.cross_rank}});
  }
  return members;
}

}  // namespace

Reply ErrorReply(int status, const char* code, std::string message) {
  Reply r;
  r.status = status;
  r.body = {{"error", std::move(message)}, {"code", code}};
  return r;
}

RendezvousService::RendezvousService(ServiceOptions options)
    : options_(std::move(options)),
      server_id_(NewServerId()),
      membership_(options_.policy, Clock::now()),
      kv_(KvStore::Limits{options_.kv_max_bytes}) {
  InstallMetrics();
  ticker_ = std::thread([this] { TickerLoop(); });
}

RendezvousService::~RendezvousService() { Shutdown(); }

void RendezvousService::Shutdown() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  kv_.Shutdown();
  if (ticker_.joinable()) ticker_.join();
}

void RendezvousService::TickerLoop() {
  MutexLock lock(mu_);
  while (!stopping_) {
    lock.WaitFor(cv_, std::chrono::milliseconds(20));
    if (stopping_) break;
    membership_.Tick(Clock::now());
    AfterChange();
  }
}

void RendezvousService::Log(const std::string& line) {
  if (!options_.log) return;
  MutexLock lock(log_mu_);
  std::fprintf(stderr, "khorovod-rendezvous[%s]: %s\n", options_.job.c_str(), line.c_str());
}

void RendezvousService::AfterChange() {
  for (const Membership::Loss& loss : membership_.TakeLosses()) {
    detection_seconds_[static_cast<size_t>(loss.reason)]->Observe(double(loss.silent.count()) /
                                                                  1000.0);
  }
  bool changed = false;
  if (membership_.generation() != seen_generation_) {
    seen_generation_ = membership_.generation();
    changed = true;
    auto world = membership_.world();
    std::string names;
    for (const Assignment& a : world->members) names += (names.empty() ? "" : ", ") + a.name;
    formation_seconds_->Observe(double(world->formation_time.count()) / 1000.0);
    Log("generation " + std::to_string(seen_generation_) + " formed in " +
        std::to_string(world->formation_time.count()) + " ms: [" + names + "]");
    kv_.DropGenerationsBelow(seen_generation_ - 1);
  }
  // A generation that was replaced, lost a member, or belongs to a failed job
  // will never finish forming: its KV waits end now (kv_store.h, Closing).
  const int64_t current = membership_.generation();
  if (kv_closed_through_ < current - 1) kv_closed_through_ = current - 1;
  if (kv_closed_through_ < current && membership_.state() != JobState::kRunning)
    kv_closed_through_ = current;
  kv_.CloseGenerationsUpTo(kv_closed_through_);
  if (membership_.state() == JobState::kFailed && !seen_failed_) {
    seen_failed_ = true;
    changed = true;
    Log("job failed: " + membership_.failure_reason());
  }
  if (changed) cv_.notify_all();
}

Reply RendezvousService::FromMembership(const MembershipResult& r) {
  switch (r.error) {
    case MembershipError::kOk:
      return Reply{};
    case MembershipError::kInvalidArgument:
      return ErrorReply(400, error_code::kInvalidArgument, r.message);
    case MembershipError::kUnknownWorker:
      return ErrorReply(404, error_code::kUnknownWorker, r.message);
    case MembershipError::kBadGeneration:
      return ErrorReply(409, error_code::kBadGeneration, r.message);
    case MembershipError::kJobFinishing:
      return ErrorReply(409, error_code::kJobFinishing, r.message);
    case MembershipError::kFenced:
      return ErrorReply(410, error_code::kWorkerFenced, r.message);
    case MembershipError::kBlacklisted: {
      Reply reply = ErrorReply(429, error_code::kBlacklisted, r.message);
      reply.body["retry_after_ms"] = r.retry_after.count();
      return reply;
    }
    case MembershipError::kJobFailed: {
      Reply reply = ErrorReply(409, error_code::kJobFailed, r.message);
      reply.body["job_failed"] = true;
      reply.body["reason"] = membership_.failure_reason();
      return reply;
    }
  }
  return ErrorReply(500, error_code::kInternal, "unexpected membership result");
}

std::optional<Reply> RendezvousService::Fenced(const std::string& name,
                                               const std::string& incarnation) {
  MembershipResult r = membership_.CheckIncarnation(name, incarnation);
  if (r.ok()) return std::nullopt;
  // Training is over and no generation forms any more, so the zombie cannot
  // rejoin anyway: it ends like a late joiner (exit 0), not as a failure
  // that would fail the job after its end.
  if (membership_.finishing())
    return FromMembership(
        {MembershipError::kJobFinishing, "the job is finishing: " + r.message, Millis(0)});
  Log("refused a request of a fenced worker: " + r.message);
  return FromMembership(r);
}

RendezvousService::Clock::time_point RendezvousService::DeadlineFor(Millis timeout) const {
  return Clock::now() + std::clamp(timeout, Millis(0), options_.max_wait);
}

Reply RendezvousService::Register(const WorkerSpec& spec) {
  MutexLock lock(mu_);
  MembershipResult r = membership_.Register(spec, Clock::now());
  AfterChange();
  if (!r.ok()) {
    if (r.error == MembershipError::kBlacklisted) Log("refused registration: " + r.message);
    return FromMembership(r);
  }
  Log("registered worker '" + spec.name + "' at " + spec.address + " (" +
      std::to_string(spec.slots) + " slots)");
  Reply reply;
  Millis hb = options_.policy.heartbeat_timeout;
  reply.body = {{"name", spec.name},
                {"server_id", server_id_},
                {"generation", membership_.generation()},
                {"state", "pending"},
                {"heartbeat_interval_ms", std::max<int64_t>(1, hb.count() / 5)},
                {"heartbeat_timeout_ms", hb.count()}};
  return reply;
}

Reply RendezvousService::Heartbeat(const std::string& name, const std::string& incarnation) {
  MutexLock lock(mu_);
  if (auto fenced = Fenced(name, incarnation)) return *fenced;
  HeartbeatView view;
  MembershipResult r = membership_.Heartbeat(name, Clock::now(), &view);
  AfterChange();
  Reply reply = FromMembership(r);
  reply.body["generation"] = view.generation;
  reply.body["server_id"] = server_id_;
  if (r.ok()) {
    reply.body["membership_changed"] = view.membership_changed;
    reply.body["reforming"] = view.reforming;
    reply.body["job_failed"] = false;
    reply.body["state"] = view.member ? "active" : "pending";
  }
  return reply;
}

Reply RendezvousService::Leave(const std::string& name, const std::string& reason,
                               const std::string& incarnation) {
  MutexLock lock(mu_);
  if (auto fenced = Fenced(name, incarnation)) return *fenced;
  MembershipResult r = membership_.Leave(name, Clock::now(), reason == kLeaveFinished);
  AfterChange();
  if (r.ok()) Log("worker '" + name + "' left" + (reason.empty() ? "" : ": " + reason));
  Reply reply = FromMembership(r);
  if (r.ok()) reply.body["removed"] = true;
  return reply;
}

Reply RendezvousService::Evict(const std::string& name, const std::string& reason) {
  MutexLock lock(mu_);
  MembershipResult r = membership_.Evict(name, Clock::now());
  AfterChange();
  if (r.ok()) Log("worker '" + name + "' removed" + (reason.empty() ? "" : ": " + reason));
  Reply reply = FromMembership(r);
  if (r.ok()) reply.body["removed"] = true;
  return reply;
}

void RendezvousService::Exited(const std::string& name) {
  MutexLock lock(mu_);
  membership_.Exited(name, Clock::now());
  AfterChange();
}

Reply RendezvousService::ReportFailure(const std::string& name, const std::string& reason,
                                       const std::string& incarnation) {
  MutexLock lock(mu_);
  if (auto fenced = Fenced(name, incarnation)) return *fenced;
  MembershipResult r = membership_.ReportFailure(name, reason, Clock::now());
  AfterChange();
  if (r.ok()) Log("worker '" + name + "' reported a failure: " + reason);
  Reply reply = FromMembership(r);
  if (r.ok()) reply.body["removed"] = true;
  return reply;
}

Reply RendezvousService::AwaitNext(const std::string& name, int64_t after, Millis timeout,
                                   const std::string& incarnation) {
  auto deadline = DeadlineFor(timeout);
  MutexLock lock(mu_);
  for (;;) {
    if (stopping_)
      return ErrorReply(503, error_code::kShuttingDown, "the rendezvous server is shutting down");
    if (auto fenced = Fenced(name, incarnation)) return *fenced;
    NextView view;
    MembershipResult r = membership_.AwaitNext(name, after, Clock::now(), &view);
    AfterChange();
    if (!r.ok()) return FromMembership(r);
    if (view.ready) {
      const World& w = *view.world;
      const Assignment& me = w.members.at(static_cast<size_t>(view.rank));
      Reply reply;
      reply.body = {{"ready", true},
                    {"server_id", server_id_},
                    {"generation", w.generation},
                    {"rank", me.rank},
                    {"size", w.size},
                    {"local_rank", me.local_rank},
                    {"local_size", me.local_size},
                    {"cross_rank", me.cross_rank},
                    {"cross_size", w.cross_size},
                    {"by_node",
                     {{"local_rank", me.by_node.local_rank},
                      {"local_size", me.by_node.local_size},
                      {"cross_rank", me.by_node.cross_rank},
                      {"cross_size", me.by_node.cross_size}}},
                    {"world", WorldJson(w)}};
      return reply;
    }
    auto now = Clock::now();
    if (now >= deadline) {
      Reply reply;
      reply.body = {{"ready", false},
                    {"server_id", server_id_},
                    {"generation", membership_.generation()},
                    {"state", JobStateName(membership_.state())}};
      return reply;
    }
    // Wake regularly so that the wait also counts as a heartbeat.
    Millis beat = std::clamp(options_.policy.heartbeat_timeout / 4, Millis(1), Millis(1000));
    lock.WaitUntil(cv_, std::min(deadline, now + beat));
  }
}

Reply RendezvousService::JobStatus() {
  MutexLock lock(mu_);
  auto now = Clock::now();
  membership_.Tick(now);
  AfterChange();
  MembershipStats s = membership_.Stats(now);
  Reply reply;
  auto world = membership_.world();
  reply.body = {{"job", options_.job},
                {"server_id", server_id_},
                {"state", JobStateName(s.state)},
                {"generation", s.generation},
                {"failure_reason", membership_.failure_reason()},
                {"resets", s.resets},
                {"world", world ? WorldJson(*world) : json::array()},
                {"pending", membership_.PendingNames()}};
  return reply;
}

Reply RendezvousService::CheckKvGeneration(int64_t generation) {
  MutexLock lock(mu_);
  if (membership_.failed()) {
    return FromMembership(
        {MembershipError::kJobFailed, "job failed: " + membership_.failure_reason(), Millis(0)});
  }
  int64_t current = membership_.generation();
  if (generation < 0)
    return ErrorReply(400, error_code::kInvalidArgument, "generation must not be negative");
  if (generation > current) {
    return ErrorReply(404, error_code::kUnknownGeneration,
                      "generation " + std::to_string(generation) +
                          " has not been formed (current " + std::to_string(current) + ")");
  }
  if (generation != 0 && generation < current - 1) {
    return ErrorReply(
        410, error_code::kGenerationGone,
        "generation " + std::to_string(generation) + " is over and its keys were dropped");
  }
  return Reply{0, json::object()};
}

namespace {
Reply FromKv(KvStore::Result r, const std::string& key) {
  switch (r) {
    case KvStore::Result::kOk:
      return Reply{};
    case KvStore::Result::kNotFound:
      return ErrorReply(404, error_code::kKeyNotFound, "key '" + key + "' not found");
    case KvStore::Result::kNotInteger:
      return ErrorReply(409, error_code::kNotAnInteger,
                        "key '" + key + "' does not hold an int64 or the sum overflows");
    case KvStore::Result::kFull:
      return ErrorReply(507, error_code::kStoreFull, "the key-value store is full");
    case KvStore::Result::kShutdown:
      return ErrorReply(503, error_code::kShuttingDown, "the rendezvous server is shutting down");
    case KvStore::Result::kClosed:
      break;  // KvOver: needs the generation
  }
  return ErrorReply(500, error_code::kInternal, "unexpected store result");
}

Reply KvOver(int64_t generation) {
  return ErrorReply(410, error_code::kGenerationOver,
                    "generation " + std::to_string(generation) +
                        " will not form: it lost a member or a newer generation replaced it; "
                        "ask the rendezvous for the next generation");
}
}  // namespace

Reply RendezvousService::KvSet(int64_t generation, const std::string& key, std::string value) {
  if (Reply c = CheckKvGeneration(generation); c.status != 0) return c;
  return FromKv(kv_.Set(generation, key, std::move(value)), key);
}

Reply RendezvousService::KvGet(int64_t generation, const std::string& key, Millis timeout) {
  if (Reply c = CheckKvGeneration(generation); c.status != 0) return c;
  std::string value;
  KvStore::Result r = kv_.Get(generation, key, DeadlineFor(timeout), &value);
  if (r == KvStore::Result::kClosed) return KvOver(generation);
  if (r != KvStore::Result::kOk) return FromKv(r, key);
  Reply reply;
  reply.body = {{"value", Base64Encode(value)}};
  return reply;
}

Reply RendezvousService::KvAdd(int64_t generation, const std::string& key, int64_t delta) {
  if (Reply c = CheckKvGeneration(generation); c.status != 0) return c;
  int64_t result = 0;
  KvStore::Result r = kv_.Add(generation, key, delta, &result);
  if (r != KvStore::Result::kOk) return FromKv(r, key);
  Reply reply;
  reply.body = {{"value", result}};
  return reply;
}

Reply RendezvousService::KvWait(int64_t generation, const std::vector<std::string>& keys,
                                Millis timeout) {
  if (Reply c = CheckKvGeneration(generation); c.status != 0) return c;
  std::vector<std::string> missing;
  KvStore::Result r = kv_.Wait(generation, keys, DeadlineFor(timeout), &missing);
  if (r == KvStore::Result::kClosed) return KvOver(generation);
  if (r != KvStore::Result::kOk && r != KvStore::Result::kNotFound) return FromKv(r, "");
  Reply reply;
  reply.body = {{"ready", r == KvStore::Result::kOk}, {"missing", missing}};
  return reply;
}

void RendezvousService::CountResponse(int status) {
  metrics::GetCounter(registry_, "khorovod_rendezvous_http_responses_total",
                      "HTTP responses by status code.", {{"code", std::to_string(status)}})
      .Increment();
}

std::string RendezvousService::Metrics() const {
  return metrics::Render({&registry_, membership_metrics_.get()});
}

void RendezvousService::InstallMetrics() {
  for (LossReason reason : {LossReason::kHeartbeat, LossReason::kReported,
                            LossReason::kReformTimeout, LossReason::kReplaced}) {
    detection_seconds_[static_cast<size_t>(reason)] = &metrics::GetHistogram(
        registry_, "khorovod_rendezvous_failure_detection_seconds",
        "How long a worker removed as a failure had been silent: the detection phase of a lost "
        "worker, by how it "
        "was found (heartbeat timeout, reported, reform timeout, replaced by a new process under "
        "its name).",
        {0.01, 0.1, 0.5, 1, 2, 5, 10, 15, 30, 60, 120}, {{"reason", LossReasonName(reason)}});
  }
  formation_seconds_ = &metrics::GetHistogram(
      registry_, "khorovod_rendezvous_formation_seconds",
      "Time from a membership change (or the first registration) to the frozen generation.",
      {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300});
  // Membership statistics are read under mu_ at scrape time rather than
  // mirrored into gauges at every change.
  membership_metrics_ = std::make_unique<metrics::ScrapeCollector>([this] {
    MembershipStats s;
    {
      MutexLock lock(mu_);
      s = membership_.Stats(Clock::now());
    }
    const std::string p = "khorovod_rendezvous_";
    prometheus::MetricFamily job_state =
        metrics::GaugeFamily(p + "job_state", "1 for the job's current state, 0 for the others.");
    for (JobState state :
         {JobState::kForming, JobState::kRunning, JobState::kReforming, JobState::kFailed}) {
      metrics::AddSample(job_state, s.state == state ? 1 : 0, {{"state", JobStateName(state)}});
    }
    return std::vector<prometheus::MetricFamily>{
        metrics::Gauge(p + "registered_workers",
                       "Workers registered (members of the current generation and pending).",
                       s.registered),
        metrics::Gauge(p + "active_workers", "Registered members of the current generation.",
                       s.active),
        metrics::Gauge(p + "pending_workers", "Registered workers waiting to join a generation.",
                       s.pending),
        metrics::Gauge(p + "generation", "Current generation number (0 before the first one).",
                       double(s.generation)),
        metrics::Gauge(p + "last_formation_seconds", "Time taken to form the last generation.",
                       double(s.last_formation.count()) / 1000.0),
        metrics::Counter(p + "joins_total", "Accepted worker registrations.", double(s.joins)),
        metrics::Counter(
            p + "failures_total",
            "Worker failures (missed heartbeats, reported failures, restarts, timeouts).",
            double(s.failures)),
        metrics::Counter(p + "resets_total", "Generations formed after the first.",
                         double(s.resets)),
        metrics::Gauge(p + "blacklisted_workers", "Worker names in registration cooldown.",
                       s.blacklisted),
        metrics::Gauge(p + "job_failed", "1 once the job has failed.",
                       s.state == JobState::kFailed ? 1 : 0),
        std::move(job_state),
        metrics::Gauge(p + "kv_bytes", "Bytes held by the key-value store.",
                       double(kv_.total_bytes())),
    };
  });
}

}  // namespace khorovod::rendezvous
