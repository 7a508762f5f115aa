// WorkerMetrics: every Prometheus metric a worker exports, registered once
// in the worker's own prometheus::Registry (prometheus-cpp), with typed
// references for the hot paths.
// docs/observability.md lists the names and defines the efficiency figures.
//
// Owned by RuntimeImpl for the whole life of the Runtime (across elastic
// generations); the executor, the background loop and elastic::State record
// into it. Served at GET /metrics when KHOROVOD_METRICS_PORT is set.
//
// Exposed communication: the time the training thread spends blocked in
// Handle::wait() (every blocking collective waits there). Completions add it
// to `blocked_ns`, which is shared so that a Handle outliving the Runtime
// still has somewhere to write.
//
// Step accounting: begin_step()/end_step() mark a training step on the
// caller's thread; compute = step time - exposed communication within the
// step (clamped at 0 when several threads waited at once).
//
// Scaling efficiency needs no baseline: samples and step time are also
// counted per world size the worker has been in, and the efficiency at a
// world size is the per-worker throughput there over the per-worker
// throughput at the smallest world size (docs/observability.md).
//
// Thread-safety: recording is allocation-free and safe from any thread
// (counters and gauges are atomics; a histogram takes its own short lock); SetTopology (a new
// generation) may lock and allocate. StepBegin/StepEnd race benignly if called from two threads
// (each step then takes the latest mark).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/op_type.h"
#include "khorovod/util/mutex.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
}  // namespace prometheus

namespace khorovod {

class RecoveryMetrics;  // observability/recovery_metrics.h

enum class ResetCause { kPeerFailure, kPeerAborted, kMembershipChanged, kCount };
const char* ResetCauseName(ResetCause cause);

class WorkerMetrics {
 public:
  using Clock = std::chrono::steady_clock;

  WorkerMetrics();
  ~WorkerMetrics();
  WorkerMetrics(const WorkerMetrics&) = delete;
  WorkerMetrics& operator=(const WorkerMetrics&) = delete;
  // From the Config at init(). `baseline_samples_per_second` > 0 enables
  // the throughput efficiency.
  void Configure(double baseline_samples_per_second, size_t fusion_threshold_bytes);

  // The exposition served at GET /metrics (text format 0.0.4).
  std::string Render() const;
  const std::shared_ptr<std::atomic<int64_t>>& blocked_ns() const { return blocked_ns_; }

  // A new generation; registers the per-world-size series on a size not
  // seen before.
  void SetTopology(int rank, int size, int64_t generation);

  void StepBegin();
  void StepEnd(int64_t samples);

  // One executed collective: `tensors` tensors, `bytes` payload bytes.
  void Collective(OpType op, size_t tensors, size_t bytes, Clock::duration elapsed);
  void FusedAllreduce(size_t bytes);
  // An allreduce completed from contributions that came with the
  // negotiation (core/eager_allreduce.h): no data-plane call, so it is not
  // counted by Collective() and does not skew bandwidth figures.
  void EagerAllreduce(size_t bytes);
  void NegotiationRound(Clock::duration elapsed);

  void Reset(ResetCause cause);
  void Recovered(Clock::duration elapsed);
  void StateSync(size_t bytes, Clock::duration elapsed);
  // An elastic commit took its snapshot (recovery_metrics.h: goodput).
  void Committed();

 private:
  // Samples and step time while the job had `size` workers.
  struct AtWorldSize {
    int size = 0;
    prometheus::Counter* samples = nullptr;
    prometheus::Counter* step_seconds = nullptr;
  };
  void CountAtWorldSize(double samples, double step_seconds);

  struct OpCounters {
    prometheus::Counter* bytes = nullptr;
    prometheus::Counter* seconds = nullptr;
    prometheus::Counter* tensors = nullptr;
    prometheus::Counter* calls = nullptr;
  };

  std::unique_ptr<prometheus::Registry> registry_;  // first: the references below point into it
  std::unique_ptr<RecoveryMetrics> recovery_;       // registers into registry_
  std::shared_ptr<std::atomic<int64_t>> blocked_ns_ = std::make_shared<std::atomic<int64_t>>(0);
  std::atomic<double> baseline_{0};
  std::atomic<double> fusion_threshold_{0};

  prometheus::Gauge& rank_;
  prometheus::Gauge& world_size_;
  prometheus::Gauge& generation_;

  prometheus::Counter& steps_;
  prometheus::Counter& samples_;
  prometheus::Counter& step_seconds_;
  prometheus::Counter& compute_seconds_;
  prometheus::Counter& comm_seconds_;
  prometheus::Histogram& step_duration_;
  prometheus::Gauge& step_efficiency_;
  prometheus::Gauge& throughput_;
  prometheus::Gauge& baseline_gauge_;
  prometheus::Gauge& scaling_efficiency_;
  prometheus::Gauge& fusion_threshold_gauge_;
  std::atomic<prometheus::Gauge*> throughput_efficiency_{nullptr};  // only with a baseline
  Mutex sizes_mu_;                                                  // SetTopology
  // Entries never move or go.
  std::map<int, std::unique_ptr<AtWorldSize>> sizes_ GUARDED_BY(sizes_mu_);
  std::atomic<const AtWorldSize*> current_size_{nullptr};
  std::atomic<const AtWorldSize*> smallest_size_{nullptr};  // with marked steps

  // Indexed by OpType, allreduce to barrier (join moves no data).
  static constexpr size_t kTimedOps = static_cast<size_t>(OpType::kBarrier) + 1;
  std::array<OpCounters, kTimedOps> ops_{};
  prometheus::Histogram& fusion_fill_;
  prometheus::Counter& eager_tensors_;
  prometheus::Counter& eager_bytes_;
  prometheus::Counter& negotiation_seconds_;
  prometheus::Counter& negotiation_rounds_;
  prometheus::Histogram& negotiation_duration_;

  std::array<prometheus::Counter*, static_cast<size_t>(ResetCause::kCount)> resets_{};
  prometheus::Histogram& recovery_duration_;
  prometheus::Counter& sync_bytes_;
  prometheus::Counter& sync_seconds_;
  prometheus::Counter& syncs_;

  // Step marks: nanoseconds since Clock's epoch, and blocked_ns at the mark.
  std::atomic<int64_t> step_start_ns_;
  std::atomic<int64_t> step_start_blocked_ns_{0};
};

}  // namespace khorovod
