#include "observability/recovery_metrics.h"

#include <algorithm>

#include "khorovod/metrics/exposition.h"

namespace khorovod {
namespace {

constexpr const char* kPhase = "khorovod_worker_recovery_phase_seconds";
constexpr const char* kPhaseHelp =
    "Time a failure or membership change cost this worker, by phase: detection (last commit to the "
    "failure "
    "reaching the elastic loop), rendezvous (reset to state sync), state_sync, first_step (the "
    "first step after).";

prometheus::Histogram& Phase(prometheus::Registry& r, const char* phase) {
  return metrics::GetHistogram(r, kPhase, kPhaseHelp, metrics::ExponentialBuckets(0.001, 2, 18),
                               {{"phase", phase}});
}

}  // namespace

int64_t RecoveryMetrics::NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

RecoveryMetrics::RecoveryMetrics(prometheus::Registry& r)
    : detection_(Phase(r, "detection")),
      rendezvous_(Phase(r, "rendezvous")),
      state_sync_(Phase(r, "state_sync")),
      first_step_(Phase(r, "first_step")),
      rolled_back_(metrics::GetCounter(
          r, "khorovod_worker_steps_rolled_back_total",
          "Marked steps discarded by rolling back to the last commit after a failure.")),
      useful_seconds_(
          metrics::GetCounter(r, "khorovod_worker_useful_step_seconds_total",
                              "Step time of marked steps that a commit kept (not rolled back).")),
      lost_seconds_(metrics::GetCounter(r, "khorovod_worker_rolled_back_step_seconds_total",
                                        "Step time of marked steps rolled back after a failure.")),
      goodput_(metrics::GetGauge(
          r, "khorovod_worker_goodput_ratio",
          "Useful step time over wall time since this worker's runtime started.")),
      start_ns_(NowNs()),
      last_commit_ns_(start_ns_) {}

void RecoveryMetrics::StepEnded(double step_seconds) {
  steps_since_commit_.fetch_add(1, std::memory_order_relaxed);
  seconds_since_commit_.store(seconds_since_commit_.load(std::memory_order_relaxed) + step_seconds,
                              std::memory_order_relaxed);
  if (first_step_pending_.exchange(false, std::memory_order_relaxed))
    first_step_.Observe(step_seconds);
}

void RecoveryMetrics::Committed() {
  const int64_t now = NowNs();
  const double seconds = seconds_since_commit_.exchange(0, std::memory_order_relaxed);
  steps_since_commit_.store(0, std::memory_order_relaxed);
  useful_seconds_.Increment(seconds);
  useful_total_.store(useful_total_.load(std::memory_order_relaxed) + seconds,
                      std::memory_order_relaxed);
  last_commit_ns_.store(now, std::memory_order_relaxed);
  UpdateGoodput(now);
}

void RecoveryMetrics::ResetStarted(bool rolled_back) {
  const int64_t now = NowNs();
  // A reset that fails and is retried is one recovery: timed from its start.
  int64_t expected = 0;
  const bool first =
      reset_start_ns_.compare_exchange_strong(expected, now, std::memory_order_relaxed);
  first_step_pending_.store(false, std::memory_order_relaxed);
  if (!rolled_back) return;
  const int64_t steps = steps_since_commit_.exchange(0, std::memory_order_relaxed);
  rolled_back_.Increment(static_cast<double>(steps));
  lost_seconds_.Increment(seconds_since_commit_.exchange(0, std::memory_order_relaxed));
  if (first)
    detection_.Observe(std::max<int64_t>(now - last_commit_ns_.load(std::memory_order_relaxed), 0) *
                       1e-9);
  UpdateGoodput(now);
}

void RecoveryMetrics::StateSynced(std::chrono::steady_clock::duration elapsed) {
  const int64_t started = reset_start_ns_.load(std::memory_order_relaxed);
  if (started == 0) return;  // the first sync of the job, not a recovery
  const int64_t sync_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count();
  rendezvous_.Observe(std::max<int64_t>(NowNs() - sync_ns - started, 0) * 1e-9);
  state_sync_.Observe(sync_ns * 1e-9);
}

void RecoveryMetrics::Recovered() {
  const int64_t now = NowNs();
  if (reset_start_ns_.exchange(0, std::memory_order_relaxed) == 0) return;
  // Detection of the next failure counts from here, not from a commit made
  // before this recovery.
  last_commit_ns_.store(now, std::memory_order_relaxed);
  first_step_pending_.store(true, std::memory_order_relaxed);
}

void RecoveryMetrics::UpdateGoodput(int64_t now) {
  const double wall = std::max<int64_t>(now - start_ns_, 1) * 1e-9;
  goodput_.Set(std::min(1.0, useful_total_.load(std::memory_order_relaxed) / wall));
}

}  // namespace khorovod
