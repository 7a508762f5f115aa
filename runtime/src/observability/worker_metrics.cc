// WorkerMetrics: see worker_metrics.h. Names and meanings are documented in
// docs/observability.md; tests/metrics checks the two agree.
#include "observability/worker_metrics.h"

#include <algorithm>

#include "khorovod/metrics/exposition.h"
#include "observability/recovery_metrics.h"

namespace khorovod {
namespace {

using metrics::ExponentialBuckets;
using metrics::GetCounter;
using metrics::GetGauge;
using metrics::GetHistogram;

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr const char* kBytes = "khorovod_worker_collective_bytes_total";
constexpr const char* kSeconds = "khorovod_worker_collective_seconds_total";
constexpr const char* kTensors = "khorovod_worker_collective_tensors_total";
constexpr const char* kCalls = "khorovod_worker_collective_calls_total";
constexpr const char* kResets = "khorovod_worker_resets_total";
constexpr const char* kSamplesAt = "khorovod_worker_samples_at_world_size_total";
constexpr const char* kStepSecondsAt = "khorovod_worker_step_seconds_at_world_size_total";
constexpr const char* kObservedSize = "khorovod_worker_world_size_observed";

}  // namespace

const char* ResetCauseName(ResetCause cause) {
  switch (cause) {
    case ResetCause::kPeerFailure:
      return "peer_failure";
    case ResetCause::kPeerAborted:
      return "peer_aborted";
    case ResetCause::kMembershipChanged:
      return "membership_changed";
    case ResetCause::kCount:
      break;
  }
  return "unknown";
}

WorkerMetrics::WorkerMetrics()
    : registry_(std::make_unique<prometheus::Registry>()),
      recovery_(std::make_unique<RecoveryMetrics>(*registry_)),
      rank_(GetGauge(*registry_, "khorovod_worker_rank",
                     "This worker's rank in the current generation.")),
      world_size_(
          GetGauge(*registry_, "khorovod_worker_world_size", "Workers in the current generation.")),
      generation_(GetGauge(*registry_, "khorovod_worker_generation",
                           "Rendezvous generation this worker is in (0 in a static job).")),
      steps_(GetCounter(*registry_, "khorovod_worker_steps_total",
                        "Training steps marked with end_step().")),
      samples_(GetCounter(*registry_, "khorovod_worker_samples_total",
                          "Samples this worker processed in marked steps.")),
      step_seconds_(GetCounter(*registry_, "khorovod_worker_step_seconds_total",
                               "Wall time of marked steps.")),
      compute_seconds_(GetCounter(*registry_, "khorovod_worker_compute_seconds_total",
                                  "Step time not spent blocked on collectives.")),
      comm_seconds_(
          GetCounter(*registry_, "khorovod_worker_exposed_communication_seconds_total",
                     "Step time the training thread spent blocked waiting for collectives.")),
      step_duration_(GetHistogram(*registry_, "khorovod_worker_step_duration_seconds",
                                  "Wall time of one marked step.",
                                  ExponentialBuckets(0.0005, 2, 18))),
      step_efficiency_(GetGauge(*registry_, "khorovod_worker_step_efficiency",
                                "Compute time over step time, for the last step (1 = no exposed "
                                "communication).")),
      throughput_(GetGauge(*registry_, "khorovod_worker_throughput_samples_per_second",
                           "This worker's samples per second in the last step.")),
      baseline_gauge_(GetGauge(
          *registry_, "khorovod_worker_baseline_samples_per_second",
          "One worker's throughput alone (KHOROVOD_BASELINE_SAMPLES_PER_SECOND; 0 = unknown).")),
      scaling_efficiency_(GetGauge(
          *registry_, "khorovod_worker_scaling_efficiency",
          "This worker's samples per step second at the current world size over the same at the "
          "smallest world size it has trained at (1 there).")),
      fusion_threshold_gauge_(GetGauge(*registry_, "khorovod_worker_fusion_threshold_bytes",
                                       "Fusion buffer size (KHOROVOD_FUSION_THRESHOLD).")),
      fusion_fill_(GetHistogram(*registry_, "khorovod_worker_fusion_fill_ratio",
                                "Bytes of a fused allreduce over the fusion threshold.",
                                {0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 1})),
      eager_tensors_(GetCounter(*registry_, "khorovod_worker_eager_allreduce_tensors_total",
                                "Small allreduces completed from data sent with the negotiation "
                                "(no data-plane exchange).")),
      eager_bytes_(GetCounter(*registry_, "khorovod_worker_eager_allreduce_bytes_total",
                              "Payload bytes of those allreduces.")),
      negotiation_seconds_(GetCounter(*registry_, "khorovod_worker_negotiation_seconds_total",
                                      "Time spent in negotiation rounds that had work.")),
      negotiation_rounds_(GetCounter(*registry_, "khorovod_worker_negotiation_rounds_total",
                                     "Negotiation rounds that had work.")),
      negotiation_duration_(GetHistogram(*registry_, "khorovod_worker_negotiation_duration_seconds",
                                         "Duration of one negotiation round that had work.",
                                         ExponentialBuckets(0.00001, 4, 10))),
      recovery_duration_(GetHistogram(
          *registry_, "khorovod_worker_recovery_duration_seconds",
          "From the start of an elastic reset to the end of the state sync that follows it.",
          {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600})),
      sync_bytes_(GetCounter(*registry_, "khorovod_worker_state_sync_bytes_total",
                             "Bytes of elastic state broadcast in state syncs.")),
      sync_seconds_(GetCounter(*registry_, "khorovod_worker_state_sync_seconds_total",
                               "Time spent in state syncs.")),
      syncs_(GetCounter(*registry_, "khorovod_worker_state_syncs_total", "Elastic state syncs.")),
      step_start_ns_(NowNs()) {
  for (size_t i = 0; i < kTimedOps; ++i) {
    const prometheus::Labels op{{"op", std::string(OpTypeName(static_cast<OpType>(i)))}};
    ops_[i].bytes =
        &GetCounter(*registry_, kBytes, "Payload bytes of executed collectives, by operation.", op);
    ops_[i].seconds = &GetCounter(*registry_, kSeconds,
                                  "Time executing collectives (data plane), by operation.", op);
    ops_[i].tensors =
        &GetCounter(*registry_, kTensors, "Tensors processed by collectives, by operation.", op);
    ops_[i].calls = &GetCounter(*registry_, kCalls,
                                "Data-plane calls (a fused allreduce is one), by operation.", op);
  }
  for (size_t i = 0; i < resets_.size(); ++i) {
    resets_[i] = &GetCounter(*registry_, kResets, "Elastic resets, by cause.",
                             {{"cause", ResetCauseName(static_cast<ResetCause>(i))}});
  }
}

WorkerMetrics::~WorkerMetrics() = default;

std::string WorkerMetrics::Render() const { return metrics::Render({registry_.get()}); }

void WorkerMetrics::Configure(double baseline, size_t fusion_threshold_bytes) {
  baseline_.store(baseline, std::memory_order_relaxed);
  baseline_gauge_.Set(baseline);
  fusion_threshold_.store(static_cast<double>(fusion_threshold_bytes), std::memory_order_relaxed);
  fusion_threshold_gauge_.Set(static_cast<double>(fusion_threshold_bytes));
  if (baseline > 0) {
    throughput_efficiency_.store(
        &GetGauge(
            *registry_, "khorovod_worker_throughput_efficiency",
            "This worker's samples per second in the last step over the single-worker baseline."),
        std::memory_order_release);
  }
}

void WorkerMetrics::SetTopology(int rank, int size, int64_t generation) {
  rank_.Set(rank);
  world_size_.Set(size);
  generation_.Set(static_cast<double>(generation));
  if (size <= 0) return;
  MutexLock lock(sizes_mu_);
  std::unique_ptr<AtWorldSize>& at = sizes_[size];
  if (!at) {
    const prometheus::Labels label{{"world_size", std::to_string(size)}};
    at = std::make_unique<AtWorldSize>();
    at->size = size;
    at->samples = &GetCounter(*registry_, kSamplesAt,
                              "Samples this worker processed while the job had world_size "
                              "workers.",
                              label);
    at->step_seconds = &GetCounter(*registry_, kStepSecondsAt,
                                   "Step time while the job had world_size workers.", label);
    GetGauge(*registry_, kObservedSize,
             "The world sizes this worker has been in (value = world_size), to find the "
             "smallest one in PromQL.",
             label)
        .Set(size);
  }
  current_size_.store(at.get(), std::memory_order_release);
}

// Per-worker throughput at a world size = samples / step seconds there.
// Steps of zero duration add samples but no time; the ratio waits for time.
void WorkerMetrics::CountAtWorldSize(double samples, double step_seconds) {
  const AtWorldSize* at = current_size_.load(std::memory_order_acquire);
  if (!at) return;  // steps marked before init()
  at->samples->Increment(samples);
  at->step_seconds->Increment(step_seconds);
  // The reference: the smallest world size with marked steps.
  const AtWorldSize* ref = smallest_size_.load(std::memory_order_acquire);
  while ((!ref || at->size < ref->size) &&
         !smallest_size_.compare_exchange_weak(ref, at, std::memory_order_acq_rel,
                                               std::memory_order_acquire)) {
  }
  if (!ref || at->size < ref->size) ref = at;
  const double at_seconds = at->step_seconds->Value(), ref_seconds = ref->step_seconds->Value();
  if (at_seconds <= 0 || ref_seconds <= 0) return;
  const double ref_throughput = ref->samples->Value() / ref_seconds;
  if (ref_throughput > 0)
    scaling_efficiency_.Set(at->samples->Value() / at_seconds / ref_throughput);
}

void WorkerMetrics::StepBegin() {
  step_start_blocked_ns_.store(blocked_ns_->load(std::memory_order_relaxed),
                               std::memory_order_relaxed);
  step_start_ns_.store(NowNs(), std::memory_order_relaxed);
}

void WorkerMetrics::StepEnd(int64_t samples) {
  const int64_t now = NowNs();
  const int64_t blocked = blocked_ns_->load(std::memory_order_relaxed);
  const int64_t start = step_start_ns_.exchange(now, std::memory_order_relaxed);
  const int64_t start_blocked = step_start_blocked_ns_.exchange(blocked, std::memory_order_relaxed);
  const double step = std::max<int64_t>(now - start, 0) * 1e-9;
  const double comm = std::clamp<double>((blocked - start_blocked) * 1e-9, 0.0, step);
  steps_.Increment();
  samples_.Increment(static_cast<double>(std::max<int64_t>(samples, 0)));
  step_seconds_.Increment(step);
  compute_seconds_.Increment(step - comm);
  comm_seconds_.Increment(comm);
  step_duration_.Observe(step);
  recovery_->StepEnded(step);
  CountAtWorldSize(static_cast<double>(std::max<int64_t>(samples, 0)), step);
  if (step > 0) {
    step_efficiency_.Set((step - comm) / step);
    const double throughput = static_cast<double>(std::max<int64_t>(samples, 0)) / step;
    throughput_.Set(throughput);
    prometheus::Gauge* efficiency = throughput_efficiency_.load(std::memory_order_acquire);
    if (efficiency) efficiency->Set(throughput / baseline_.load(std::memory_order_relaxed));
  }
}

void WorkerMetrics::Collective(OpType op, size_t tensors, size_t bytes, Clock::duration elapsed) {
  const size_t i = static_cast<size_t>(op);
  if (i >= kTimedOps) return;
  ops_[i].bytes->Increment(static_cast<double>(bytes));
  ops_[i].seconds->Increment(Seconds(elapsed));
  ops_[i].tensors->Increment(static_cast<double>(tensors));
  ops_[i].calls->Increment();
}

void WorkerMetrics::FusedAllreduce(size_t bytes) {
  const double threshold = fusion_threshold_.load(std::memory_order_relaxed);
  if (threshold > 0) fusion_fill_.Observe(static_cast<double>(bytes) / threshold);
}

void WorkerMetrics::EagerAllreduce(size_t bytes) {
  eager_tensors_.Increment();
  eager_bytes_.Increment(static_cast<double>(bytes));
}

void WorkerMetrics::NegotiationRound(Clock::duration elapsed) {
  const double s = Seconds(elapsed);
  negotiation_seconds_.Increment(s);
  negotiation_rounds_.Increment();
  negotiation_duration_.Observe(s);
}

void WorkerMetrics::Reset(ResetCause cause) {
  const size_t i = static_cast<size_t>(cause);
  if (i < resets_.size()) resets_[i]->Increment();
  recovery_->ResetStarted(cause != ResetCause::kMembershipChanged);
}

void WorkerMetrics::Committed() { recovery_->Committed(); }

void WorkerMetrics::Recovered(Clock::duration elapsed) {
  recovery_duration_.Observe(Seconds(elapsed));
  recovery_->Recovered();
  // The recovery is not a training step: the next step starts now.
  StepBegin();
}

void WorkerMetrics::StateSync(size_t bytes, Clock::duration elapsed) {
  sync_bytes_.Increment(static_cast<double>(bytes));
  sync_seconds_.Increment(Seconds(elapsed));
  syncs_.Increment();
  recovery_->StateSynced(elapsed);
}

}  // namespace khorovod
