// RecoveryMetrics: what failures cost a worker, and its goodput
// (docs/observability.md, "Resilience"). Registered in the worker's registry
// by WorkerMetrics, which forwards the step, reset, sync and recovery marks;
// elastic commits call Committed().
//
// A failure (a reset with rollback) costs, by phase:
//   detection   from the last commit (or the end of the last recovery, if
//               later) to the failure reaching the elastic loop: the work of
//               the step in flight plus the wait until the failure surfaced;
//   rendezvous  from the reset's start to the start of the state sync
//               (leaving the old generation, waiting for and connecting the
//               next one);
//   state_sync  the state sync;
//   first_step  the first marked step after the recovery (it warms caches).
// A membership change (a join, or a graceful leave at a commit) costs the
// last three only. Steps marked since the last commit are rolled back by a
// failure (steps_rolled_back_total); steps followed by a commit are useful
// (useful_step_seconds_total). Goodput = useful step time / wall time since
// the metrics were created (the runtime's start).
//
// Thread-safety: every method may be called from any thread; they update
// atomics only (no lock, no allocation). The marks come from the training
// thread in practice, so the read-modify-write sequences do not race.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace khorovod {

class RecoveryMetrics {
 public:
  explicit RecoveryMetrics(prometheus::Registry& registry);

  // A marked step ended after `step_seconds`.
  void StepEnded(double step_seconds);
  // An elastic commit took its snapshot: the steps since the last are useful.
  void Committed();
  // The elastic loop resets; `rolled_back`: after a failure (restore()).
  void ResetStarted(bool rolled_back);
  // A state sync of `elapsed` ended (the phases count only while recovering).
  void StateSynced(std::chrono::steady_clock::duration elapsed);
  // The sync after a reset succeeded: training resumes.
  void Recovered();

 private:
  static int64_t NowNs();
  void UpdateGoodput(int64_t now);

  prometheus::Histogram& detection_;
  prometheus::Histogram& rendezvous_;
  prometheus::Histogram& state_sync_;
  prometheus::Histogram& first_step_;
  prometheus::Counter& rolled_back_;
  prometheus::Counter& useful_seconds_;
  prometheus::Counter& lost_seconds_;
  prometheus::Gauge& goodput_;

  const int64_t start_ns_;
  std::atomic<int64_t> last_commit_ns_;
  std::atomic<int64_t> steps_since_commit_{0};
  std::atomic<double> seconds_since_commit_{0};
  std::atomic<double> useful_total_{0};
  std::atomic<int64_t> reset_start_ns_{0};  // 0: not recovering
  std::atomic<bool> first_step_pending_{false};
};

}  // namespace khorovod
