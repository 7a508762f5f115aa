// Membership: the elastic membership policy of one job, as a pure state
// machine. It decides who is in each generation and when a generation is
// frozen; it does no I/O, starts no threads and never reads a clock: every
// call takes the current time, so tests drive it with a fake clock.
//
// Vocabulary. A *generation* G >= 1 is a frozen, ordered World. A registered
// worker is either a *member* of the current generation or *pending*. A
// worker is *ready* once it has asked for the generation after the current
// one (AwaitNext with after == G for a member; any AwaitNext for a pending
// worker).
//
// Policy (each knob is in MembershipPolicy):
//  * Formation. Candidates are the surviving members of G in their previous
//    rank order (so the oldest survivor becomes rank 0), then ready pending
//    workers in registration order; at most max_workers of them, and per
//    address at most the largest `slots` declared there. A new generation is
//    frozen when (a) it is the first one, or a member was lost, or a member
//    asked for the next generation; (b) every survivor is ready; (c) there
//    are at least min_workers candidates; and (d) the settle window has
//    passed since (a)-(c) first held, or the candidates reach max_workers.
//  * Joining. A ready pending worker does not disturb a running generation
//    by itself: members see membership_changed in their heartbeat and the
//    newcomer is admitted once they ask for the next generation.
//  * Loss. A worker is removed when it leaves, reports a failure, misses
//    heartbeats for heartbeat_timeout, or (once a re-formation has started)
//    does not ask for the next generation within reform_timeout.
//  * Elastic timeout. While fewer than min_workers are registered (at start,
//    or after losses) the job waits elastic_timeout, then fails.
//  * Blacklist. Failures feed a Blacklist (see blacklist.h); a name in
//    cooldown cannot register (kBlacklisted with retry_after).
//  * Reset limit. Each generation after the first is a reset; forming one
//    more than reset_limit (when >= 0) fails the job. Once the limit is used
//    up, newcomers alone no longer raise membership_changed.
//  * Finishing. Once a member of the current generation leaves as finished,
//    the job is finishing: no generation forms any more, the elastic timeout
//    no longer applies, and AwaitNext answers kJobFinishing to every worker
//    not already admitted to the generation it asks for (late joiners exit
//    cleanly instead of waiting for a generation that never comes).
//  * Fencing. Names are reused across processes (a Kubernetes pod re-created
//    under its old name), so each process registers with an incarnation id.
//    A worker removed as a failure (missed heartbeats, a failure report, a
//    reform timeout, or replaced by a new incarnation of its name) is fenced:
//    every later call carrying its incarnation is refused with kFenced, its
//    registration included. A worker declared lost that comes back (a node
//    back from a network partition, a process resumed after a stop) can
//    therefore neither pass for the replacement that took its name nor join
//    again with its old identity; it ends (the client reports kAborted). A
//    call without an incarnation (old clients, khorovodrun's reports about
//    its children) is not checked. The fence lives in memory: a restarted
//    server fences nobody, and the kFenced check is by incarnation, so a
//    zombie of an earlier server could register again there.
//  * Spawned workers. A launcher that starts the workers itself (khorovodrun)
//    registers each one as it starts its process (spec.spawned), as Horovod's
//    driver assigns a rank to every worker it spawns. Until its process
//    registered too (a framework import may take longer than the heartbeat
//    timeout), or spawn_timeout passed, it is not removed for silence. With
//    spec.awaited, until it is ready (asked for a generation) or
//    spawn_timeout passed, it is *awaited*: if it would be admitted, members
//    see membership_changed at once (Horovod's driver notifies on discovery,
//    not on the worker's start) and no generation freezes without it. After
//    spawn_timeout it is an ordinary pending worker. A spawned worker that
//    leaves or reports a failure itself is *exiting* until its launcher
//    reports its process' exit (Exited) or spawn_timeout passes: no
//    generation freezes meanwhile, so the launcher's verdict on that exit
//    (e.g. a host blacklisted, its other workers evicted) shapes the next
//    generation, as Horovod's driver records every exit before it resumes.
//  * A failed job stays failed: every call then returns kJobFailed.
//
// Thread-safety: not thread-safe. RendezvousService serializes all calls.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "blacklist.h"
#include "world.h"

namespace khorovod::rendezvous {

using TimePoint = std::chrono::steady_clock::time_point;
using Millis = std::chrono::milliseconds;

struct MembershipPolicy {
  int min_workers = 1;
  int max_workers = 1024;
  Millis settle{1000};
  Millis heartbeat_timeout{15000};
  Millis elastic_timeout{600000};
  Millis reform_timeout{60000};
  int blacklist_threshold = 2;
  Millis blacklist_base{1000};
  Millis blacklist_max{60000};
  int reset_limit = -1;         // -1: unlimited
  Millis spawn_timeout{60000};  // how long a spawned worker is awaited (see Spawned workers)

  // Empty when valid, else what is wrong.
  std::string Validate() const;
};

enum class JobState { kForming, kRunning, kReforming, kFailed };
// Why a worker was removed as a failure.
enum class LossReason { kHeartbeat, kReported, kReformTimeout, kReplaced };
const char* LossReasonName(LossReason reason);
const char* JobStateName(JobState state);

enum class MembershipError {
  kOk,
  kInvalidArgument,
  kUnknownWorker,
  kJobFailed,
  kBlacklisted,
  kBadGeneration,
  kJobFinishing,  // AwaitNext: training finished; no generation will form any more
  kFenced,        // this incarnation of the worker was declared lost (see Fencing)
};

struct MembershipResult {
  MembershipError error = MembershipError::kOk;
  std::string message;
  Millis retry_after{0};  // kBlacklisted only
  bool ok() const { return error == MembershipError::kOk; }
};

struct HeartbeatView {
  int64_t generation = 0;           // current generation (0: none formed yet)
  bool member = false;              // a member of the current generation
  bool membership_changed = false;  // members only: the next generation will differ
  // Members only: a member was lost or has asked for the next generation, so
  // the current one can no longer finish a collective (a newcomer waiting
  // for admission alone does not set it).
  bool reforming = false;
};

struct NextView {
  bool ready = false;                  // a generation after `after` includes the worker
  std::shared_ptr<const World> world;  // set when ready
  int rank = -1;                       // set when ready
};

struct MembershipStats {
  int registered = 0;  // members + pending
  int active = 0;      // members of the current generation still registered
  int pending = 0;
  int64_t generation = 0;
  Millis last_formation{0};
  int64_t joins = 0;
  int64_t failures = 0;
  int64_t resets = 0;
  int blacklisted = 0;
  JobState state = JobState::kForming;
};

class Membership {
 public:
  // `now` starts the elastic (start-up) timeout. The policy must be valid.
  Membership(MembershipPolicy policy, TimePoint now);

  // Adds a pending worker. Registering a pending name again updates its spec
  // (idempotent retry); registering a current member again means it restarted:
  // the old incarnation is removed as a failure and the new one is pending.
  MembershipResult Register(const WorkerSpec& spec, TimePoint now);
  MembershipResult Heartbeat(const std::string& name, TimePoint now, HeartbeatView* out);
  // `finished`: the worker's training finished (see Finishing in the policy).
  MembershipResult Leave(const std::string& name, TimePoint now, bool finished = false);
  MembershipResult ReportFailure(const std::string& name, const std::string& reason, TimePoint now);
  // The launcher removed the worker (its host went away): it leaves (no
  // failure) and its process is fenced, so it cannot rejoin under its name;
  // it ends at its next rendezvous call, as Horovod ends a worker whose host
  // is no longer in the assignment ("has been removed from elastic job").
  MembershipResult Evict(const std::string& name, TimePoint now);
  // The launcher saw the process of spawned worker `name` exit (and acted
  // on it): the worker no longer holds a formation back (see Spawned
  // workers). Always ok; unknown names are ignored.
  void Exited(const std::string& name, TimePoint now);

  // "Give me the generation after `after`." A member of the current
  // generation G with after < G gets G at once; with after == G it becomes
  // ready for G+1. A pending worker becomes ready to join. after > G is
  // kBadGeneration (e.g. a worker from before a server restart).
  MembershipResult AwaitNext(const std::string& name, int64_t after, TimePoint now, NextView* out);

  // kFenced when `incarnation` (non-empty) was fenced under `name`, or differs
  // from the incarnation registered under `name`; else ok. The service checks
  // it before every call a worker makes about itself.
  MembershipResult CheckIncarnation(const std::string& name, const std::string& incarnation) const;

  // Applies timeouts and freezes a generation when the policy allows.
  // Every other mutating call does this too.
  void Tick(TimePoint now);

  JobState state() const;
  bool failed() const { return failed_; }
  bool finishing() const { return finishing_; }
  int64_t generation() const { return generation_; }
  const std::string& failure_reason() const { return failure_reason_; }
  std::shared_ptr<const World> world() const { return world_; }
  std::vector<std::string> PendingNames() const;
  MembershipStats Stats(TimePoint now) const;

  // A worker removed as a failure, and how long it had been silent then
  // (its detection time: the heartbeat timeout for a lost node, ~0 for a
  // reported failure). Drained by the service into its metrics; at most
  // kMaxLosses are kept between drains.
  struct Loss {
    LossReason reason;
    Millis silent;
  };
  std::vector<Loss> TakeLosses();

 private:
  struct Worker {
    WorkerSpec spec;
    uint64_t seq = 0;  // registration order
    TimePoint last_seen{};
    int64_t member_of = 0;  // generation it was admitted to (0: never)
    int prev_rank = -1;     // rank in member_of
    bool ready = false;
    // Registered with spec.spawned and not ready yet: when, else nullopt.
    std::optional<TimePoint> spawned_at;
    bool process_registered = false;  // its own registration arrived (after spawned_at)
  };
  struct Outlook {
    std::vector<const Worker*> survivors;  // members, by previous rank
    std::vector<const Worker*> selected;   // next generation's order
    bool reforming = false;                // a member was lost or asked for the next generation
    bool all_survivors_ready = true;
    bool newcomer_admissible = false;  // selected includes a pending worker
    bool awaiting_spawned = false;     // a spawned worker not ready yet would be admitted
  };

  bool IsFenced(const std::string& name, const std::string& incarnation) const;
  void FenceIncarnation(const std::string& name, const std::string& incarnation);
  std::string FencedWhy(const std::string& incarnation) const;  // "was declared lost" or evicted
  bool IsMember(const Worker& w) const { return generation_ > 0 && w.member_of == generation_; }
  bool ResetsExhausted() const {
    return policy_.reset_limit >= 0 && resets_ >= policy_.reset_limit;
  }
  // Spawned, its process not registered yet, within spawn_timeout.
  bool IsStarting(const Worker& w) const;
  // Awaited: spawned with `awaited`, not ready, within spawn_timeout.
  bool IsAwaited(const Worker& w) const;
  Outlook ComputeOutlook() const;
  void Remove(const std::string& name, bool failure, TimePoint now,
              LossReason reason = LossReason::kReported);
  void Fail(std::string reason);
  void Advance(TimePoint now);
  void TryForm(TimePoint now);
  void Freeze(const std::vector<const Worker*>& selected, TimePoint now);
  MembershipResult FailedResult() const;

  MembershipPolicy policy_;
  Blacklist blacklist_;
  std::map<std::string, Worker> workers_;
  // Per name, the last kFencedPerName incarnations removed as failures.
  static constexpr size_t kFencedPerName = 8;
  static constexpr size_t kMaxLosses = 1024;
  std::vector<Loss> losses_;
  std::map<std::string, std::vector<std::string>> fenced_;
  std::map<std::string, TimePoint> exiting_;  // spawned workers gone, their exit not yet seen
  std::set<std::string> evicted_;  // fenced incarnations that were evicted, not lost (for messages)
  uint64_t next_seq_ = 0;
  TimePoint now_{};  // the latest time a call passed in (for IsAwaited in const views)

  int64_t generation_ = 0;
  std::shared_ptr<const World> world_;
  bool failed_ = false;
  bool finishing_ = false;
  std::string failure_reason_;

  bool member_lost_ = false;                  // since the current generation froze
  std::optional<TimePoint> reform_started_;   // first loss / ready member since the freeze
  std::optional<TimePoint> change_detected_;  // start of the formation being timed
  std::optional<TimePoint> settle_started_;
  std::optional<TimePoint> below_min_since_;

  int64_t resets_ = 0;
  int64_t joins_ = 0;
  int64_t failures_ = 0;
  Millis last_formation_{0};
};

}  // namespace khorovod::rendezvous
