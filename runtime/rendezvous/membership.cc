#include "membership.h"

#include <algorithm>
#include <utility>

#include "protocol.h"

namespace khorovod::rendezvous {
namespace {

std::string Ms(Millis d) { return std::to_string(d.count()) + " ms"; }

MembershipResult Error(MembershipError e, std::string message) {
  return {e, std::move(message), Millis(0)};
}

}  // namespace

std::string MembershipPolicy::Validate() const {
  if (min_workers < 1) return "min-workers must be at least 1";
  if (max_workers < min_workers) return "max-workers must be at least min-workers";
  if (settle.count() < 0) return "settle must not be negative";
  if (heartbeat_timeout.count() <= 0) return "heartbeat-timeout must be positive";
  if (elastic_timeout.count() <= 0) return "elastic-timeout must be positive";
  if (reform_timeout.count() <= 0) return "reform-timeout must be positive";
  if (blacklist_threshold < 1) return "blacklist-threshold must be at least 1";
  if (blacklist_base.count() <= 0 || blacklist_max < blacklist_base) {
    return "blacklist cooldowns must satisfy 0 < base <= max";
  }
  if (reset_limit < -1) return "reset-limit must be -1 (unlimited) or >= 0";
  if (spawn_timeout.count() < 0) return "spawn-timeout must not be negative";
  return "";
}

const char* LossReasonName(LossReason reason) {
  switch (reason) {
    case LossReason::kHeartbeat:
      return "heartbeat";
    case LossReason::kReported:
      return "reported";
    case LossReason::kReformTimeout:
      return "reform_timeout";
    case LossReason::kReplaced:
      return "replaced";
  }
  return "unknown";
}

std::vector<Membership::Loss> Membership::TakeLosses() { return std::exchange(losses_, {}); }

const char* JobStateName(JobState state) {
  switch (state) {
    case JobState::kForming:
      return "forming";
    case JobState::kRunning:
      return "running";
    case JobState::kReforming:
      return "reforming";
    case JobState::kFailed:
      return "failed";
  }
  return "unknown";
}

Membership::Membership(MembershipPolicy policy, TimePoint now)
    : policy_(policy),
      blacklist_(policy.blacklist_threshold, policy.blacklist_base, policy.blacklist_max),
      below_min_since_(now) {}

JobState Membership::state() const {
  if (failed_) return JobState::kFailed;
  if (generation_ == 0) return JobState::kForming;
  return ComputeOutlook().reforming ? JobState::kReforming : JobState::kRunning;
}

MembershipResult Membership::FailedResult() const {
  return Error(MembershipError::kJobFailed, "job failed: " + failure_reason_);
}

MembershipResult Membership::Register(const WorkerSpec& spec, TimePoint now) {
  if (failed_) return FailedResult();
  if (!IsValidName(spec.name)) {
    return Error(MembershipError::kInvalidArgument,
                 "worker name must match [A-Za-z0-9][A-Za-z0-9._:-]{0,252}");
  }
  if (spec.address.empty() || spec.address.size() > kMaxAddressLength) {
    return Error(MembershipError::kInvalidArgument, "address must be 1 to 253 characters");
  }
  if (spec.slots < 1 || spec.slots > kMaxSlots) {
    return Error(MembershipError::kInvalidArgument, "slots must be between 1 and 4096");
  }
  if (IsFenced(spec.name, spec.incarnation)) {
    return Error(MembershipError::kFenced,
                 "worker '" + spec.name + "' (incarnation " + spec.incarnation + ") " +
                     FencedWhy(spec.incarnation) + "; this process may not join again");
  }
  Millis left = blacklist_.Remaining(spec.name, now);
  if (left.count() > 0) {
    MembershipResult r = Error(MembershipError::kBlacklisted,
                               "worker '" + spec.name + "' failed " +
                                   std::to_string(blacklist_.failures(spec.name)) +
                                   " times and is blacklisted for another " + Ms(left));
    r.retry_after = left;
    return r;
  }
  auto it = workers_.find(spec.name);
  if (it != workers_.end() && !IsMember(it->second)) {
    // A new process under a pending name replaced the old one: fence it.
    if (it->second.spec.incarnation != spec.incarnation)
      FenceIncarnation(spec.name, it->second.spec.incarnation);
    // The process' own registration keeps what its launcher said about it.
    const bool spawned = spec.spawned || it->second.spec.spawned;
    const bool awaited = spec.awaited || it->second.spec.awaited;
    it->second.spec = spec;  // a retried registration keeps its place in line
    it->second.spec.spawned = spawned;
    it->second.spec.awaited = awaited;
    if (!spec.spawned) it->second.process_registered = true;
    it->second.last_seen = now;
    Advance(now);
    return {};
  }
  if (it != workers_.end())
    Remove(spec.name, /*failure=*/true, now, LossReason::kReplaced);  // restarted member
  Worker w;
  w.spec = spec;
  w.seq = next_seq_++;
  w.last_seen = now;
  if (spec.spawned)
    w.spawned_at = now;
  else
    w.process_registered = true;
  workers_.emplace(spec.name, std::move(w));
  ++joins_;
  Advance(now);
  return {};
}

MembershipResult Membership::Heartbeat(const std::string& name, TimePoint now, HeartbeatView* out) {
  Advance(now);
  out->generation = generation_;
  if (failed_) return FailedResult();
  auto it = workers_.find(name);
  if (it == workers_.end())
    return Error(MembershipError::kUnknownWorker, "unknown worker '" + name + "'");
  it->second.last_seen = now;
  out->member = IsMember(it->second);
  if (out->member) {
    Outlook o = ComputeOutlook();
    out->membership_changed =
        o.reforming || ((o.newcomer_admissible || o.awaiting_spawned) && !ResetsExhausted());
    // A finishing job's last collectives still complete: members that left
    // with kLeaveFinished had finished theirs.
    out->reforming = o.reforming && !finishing_;
  }
  return {};
}

MembershipResult Membership::Leave(const std::string& name, TimePoint now, bool finished) {
  if (failed_) return FailedResult();
  auto it = workers_.find(name);
  if (it == workers_.end())
    return Error(MembershipError::kUnknownWorker, "unknown worker '" + name + "'");
  if (finished && IsMember(it->second)) finishing_ = true;
  if (!finished && it->second.spec.spawned) exiting_[name] = now;
  Remove(name, /*failure=*/false, now);
  Advance(now);
  return {};
}

MembershipResult Membership::ReportFailure(const std::string& name, const std::string& reason,
                                           TimePoint now) {
  (void)reason;  // the HTTP layer logs it
  if (failed_) return FailedResult();
  auto it = workers_.find(name);
  if (it == workers_.end())
    return Error(MembershipError::kUnknownWorker, "unknown worker '" + name + "'");
  if (it->second.spec.spawned) exiting_[name] = now;
  Remove(name, /*failure=*/true, now, LossReason::kReported);
  Advance(now);
  return {};
}

MembershipResult Membership::Evict(const std::string& name, TimePoint now) {
  if (failed_) return FailedResult();
  auto it = workers_.find(name);
  if (it == workers_.end())
    return Error(MembershipError::kUnknownWorker, "unknown worker '" + name + "'");
  const std::string incarnation = it->second.spec.incarnation;
  FenceIncarnation(name, incarnation);
  if (!incarnation.empty() && evicted_.size() < kMaxLosses) evicted_.insert(incarnation);
  Remove(name, /*failure=*/false, now);
  Advance(now);
  return {};
}

void Membership::Exited(const std::string& name, TimePoint now) {
  exiting_.erase(name);
  Advance(now);
}

MembershipResult Membership::AwaitNext(const std::string& name, int64_t after, TimePoint now,
                                       NextView* out) {
  *out = NextView{};
  Advance(now);
  if (failed_) return FailedResult();
  auto it = workers_.find(name);
  if (it == workers_.end())
    return Error(MembershipError::kUnknownWorker, "unknown worker '" + name + "'");
  if (after < 0) return Error(MembershipError::kInvalidArgument, "after must not be negative");
  if (after > generation_) {
    return Error(MembershipError::kBadGeneration,
                 "generation " + std::to_string(after) + " is newer than the current generation " +
                     std::to_string(generation_) +
                     " (did the rendezvous server restart? register again)");
  }
  it->second.last_seen = now;
  if (finishing_ && !(IsMember(it->second) && after < generation_)) {
    return Error(
        MembershipError::kJobFinishing,
        "the job is finishing: a worker finished training, so no generation will form any more");
  }
  if (!(IsMember(it->second) && after < generation_) && !it->second.ready) {
    it->second.ready = true;  // a member finished `after`, or a pending worker wants in
    if (IsMember(it->second) && !reform_started_) reform_started_ = now;
    Advance(now);
    if (failed_) return FailedResult();
    it = workers_.find(name);
    if (it == workers_.end())
      return Error(MembershipError::kUnknownWorker, "unknown worker '" + name + "'");
  }
  if (IsMember(it->second) && generation_ > after) {
    out->ready = true;
    out->world = world_;
    out->rank = it->second.prev_rank;
  }
  return {};
}

void Membership::Tick(TimePoint now) { Advance(now); }

bool Membership::IsFenced(const std::string& name, const std::string& incarnation) const {
  if (incarnation.empty()) return false;
  auto it = fenced_.find(name);
  return it != fenced_.end() && std::count(it->second.begin(), it->second.end(), incarnation) > 0;
}

void Membership::FenceIncarnation(const std::string& name, const std::string& incarnation) {
  if (incarnation.empty()) return;
  std::vector<std::string>& list = fenced_[name];
  if (std::count(list.begin(), list.end(), incarnation)) return;
  if (list.size() >= kFencedPerName) list.erase(list.begin());
  list.push_back(incarnation);
}

MembershipResult Membership::CheckIncarnation(const std::string& name,
                                              const std::string& incarnation) const {
  if (incarnation.empty()) return {};
  auto it = workers_.find(name);
  const bool superseded = it != workers_.end() && !it->second.spec.incarnation.empty() &&
                          it->second.spec.incarnation != incarnation;
  if (!superseded && !IsFenced(name, incarnation)) return {};
  return Error(MembershipError::kFenced,
               "worker '" + name + "' (incarnation " + incarnation + ") " + FencedWhy(incarnation) +
                   (superseded ? " and another process registered under its name" : "") +
                   "; this process may not take part any more");
}

std::string Membership::FencedWhy(const std::string& incarnation) const {
  return evicted_.count(incarnation)
             ? "was removed from the job by its launcher (its host went away)"
             : "was declared lost";
}

void Membership::Remove(const std::string& name, bool failure, TimePoint now, LossReason reason) {
  auto it = workers_.find(name);
  if (it == workers_.end()) return;
  if (failure && losses_.size() < kMaxLosses)
    losses_.push_back({reason, std::chrono::duration_cast<Millis>(now - it->second.last_seen)});
  if (IsMember(it->second)) {
    member_lost_ = true;
    if (!reform_started_) reform_started_ = now;
  }
  if (failure) {
    ++failures_;
    blacklist_.RecordFailure(name, now);
    FenceIncarnation(name, it->second.spec.incarnation);
  }
  workers_.erase(it);
}

void Membership::Fail(std::string reason) {
  failed_ = true;
  failure_reason_ = std::move(reason);
  settle_started_.reset();
}

bool Membership::IsStarting(const Worker& w) const {
  return w.spawned_at && !w.process_registered && now_ - *w.spawned_at < policy_.spawn_timeout;
}

bool Membership::IsAwaited(const Worker& w) const {
  return w.spawned_at && w.spec.awaited && !w.ready && !IsMember(w) &&
         now_ - *w.spawned_at < policy_.spawn_timeout;
}

void Membership::Advance(TimePoint now) {
  now_ = std::max(now_, now);
  if (failed_) return;
  std::vector<std::string> expired;
  for (const auto& [name, w] : workers_) {
    // A spawned process that has not registered yet (still importing its
    // framework) sends no heartbeats: spawn_timeout bounds it instead.
    if (IsStarting(w)) continue;
    if (now - w.last_seen >= policy_.heartbeat_timeout) expired.push_back(name);
  }
  for (const auto& name : expired) Remove(name, /*failure=*/true, now, LossReason::kHeartbeat);

  if (reform_started_ && now - *reform_started_ >= policy_.reform_timeout) {
    std::vector<std::string> stuck;
    for (const auto& [name, w] : workers_) {
      if (IsMember(w) && !w.ready) stuck.push_back(name);
    }
    for (const auto& name : stuck) Remove(name, /*failure=*/true, now, LossReason::kReformTimeout);
  }

  if (finishing_) return;  // nothing forms or times out any more
  if (static_cast<int>(workers_.size()) < policy_.min_workers) {
    if (!below_min_since_) below_min_since_ = now;
    if (now - *below_min_since_ >= policy_.elastic_timeout) {
      Fail("only " + std::to_string(workers_.size()) + " of the required " +
           std::to_string(policy_.min_workers) +
           " workers were registered for the elastic timeout of " + Ms(policy_.elastic_timeout));
      return;
    }
  } else {
    below_min_since_.reset();
  }
  TryForm(now);
}

Membership::Outlook Membership::ComputeOutlook() const {
  Outlook o;
  std::vector<const Worker*> newcomers;
  std::map<std::string, int> cap;  // address -> largest declared slots
  for (const auto& [name, w] : workers_) {
    int& c = cap[w.spec.address];
    c = std::max(c, w.spec.slots);
    if (IsMember(w)) {
      o.survivors.push_back(&w);
      if (w.ready)
        o.reforming = true;
      else
        o.all_survivors_ready = false;
    } else if (w.ready || IsAwaited(w)) {
      newcomers.push_back(&w);
    }
  }
  o.reforming = o.reforming || member_lost_;
  std::sort(o.survivors.begin(), o.survivors.end(),
            [](const Worker* a, const Worker* b) { return a->prev_rank < b->prev_rank; });
  std::sort(newcomers.begin(), newcomers.end(),
            [](const Worker* a, const Worker* b) { return a->seq < b->seq; });

  std::map<std::string, int> used;
  int admitted = 0;  // selected, plus awaited workers holding their places
  auto admit = [&](const Worker* w) {
    if (admitted >= policy_.max_workers) return false;
    int& n = used[w->spec.address];
    if (n >= cap[w->spec.address]) return false;
    ++n;
    ++admitted;
    return true;
  };
  for (const Worker* w : o.survivors) {
    if (admit(w)) o.selected.push_back(w);
  }
  for (const Worker* w : newcomers) {
    if (!admit(w)) continue;
    if (w->ready) {
      o.selected.push_back(w);
      o.newcomer_admissible = true;
    } else {
      o.awaiting_spawned = true;  // awaited: holds its place, not in this generation yet
    }
  }
  return o;
}

void Membership::TryForm(TimePoint now) {
  Outlook o = ComputeOutlook();
  bool initial = generation_ == 0;
  bool wanted = (initial && !o.selected.empty()) || o.reforming;
  bool changing = wanted || ((o.newcomer_admissible || o.awaiting_spawned) && !ResetsExhausted());
  if (!changing)
    change_detected_.reset();  // e.g. the newcomer left again
  else if (!change_detected_)
    change_detected_ = now;
  // A spawned worker that would be admitted is waited for (bounded by
  // spawn_timeout), as Horovod's rendezvous waits for every worker it spawned.
  const bool awaiting = o.awaiting_spawned && !(!initial && ResetsExhausted());
  for (auto it = exiting_.begin(); it != exiting_.end();) {
    it = now - it->second >= policy_.spawn_timeout ? exiting_.erase(it) : std::next(it);
  }
  if (!wanted || !o.all_survivors_ready || awaiting || !exiting_.empty() ||
      static_cast<int>(o.selected.size()) < policy_.min_workers) {
    settle_started_.reset();
    return;
  }
  if (!initial && ResetsExhausted()) {
    Fail("reset limit of " + std::to_string(policy_.reset_limit) +
         " re-formations reached; not forming generation " + std::to_string(generation_ + 1));
    return;
  }
  if (!settle_started_) settle_started_ = now;
  bool full = static_cast<int>(o.selected.size()) >= policy_.max_workers;
  if (!full && now - *settle_started_ < policy_.settle) return;
  Freeze(o.selected, now);
}

void Membership::Freeze(const std::vector<const Worker*>& selected, TimePoint now) {
  std::vector<WorkerSpec> specs;
  specs.reserve(selected.size());
  for (const Worker* w : selected) specs.push_back(w->spec);
  if (generation_ > 0) ++resets_;
  ++generation_;
  auto world = std::make_shared<World>(BuildWorld(generation_, specs));
  world->formation_time = std::chrono::duration_cast<Millis>(now - change_detected_.value_or(now));
  last_formation_ = world->formation_time;
  for (const Assignment& a : world->members) {
    Worker& w = workers_.at(a.name);
    w.member_of = generation_;
    w.prev_rank = a.rank;
    w.ready = false;
    w.spawned_at.reset();
  }
  world_ = std::move(world);
  member_lost_ = false;
  reform_started_.reset();
  change_detected_.reset();
  settle_started_.reset();
}

std::vector<std::string> Membership::PendingNames() const {
  std::vector<const Worker*> pending;
  for (const auto& [name, w] : workers_) {
    if (!IsMember(w)) pending.push_back(&w);
  }
  std::sort(pending.begin(), pending.end(),
            [](const Worker* a, const Worker* b) { return a->seq < b->seq; });
  std::vector<std::string> names;
  for (const Worker* w : pending) names.push_back(w->spec.name);
  return names;
}

MembershipStats Membership::Stats(TimePoint now) const {
  MembershipStats s;
  s.registered = static_cast<int>(workers_.size());
  for (const auto& [name, w] : workers_) s.active += IsMember(w) ? 1 : 0;
  s.pending = s.registered - s.active;
  s.generation = generation_;
  s.last_formation = last_formation_;
  s.joins = joins_;
  s.failures = failures_;
  s.resets = resets_;
  s.blacklisted = blacklist_.CountActive(now);
  s.state = state();
  return s;
}

}  // namespace khorovod::rendezvous
