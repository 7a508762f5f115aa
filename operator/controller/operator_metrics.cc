#include "controller/operator_metrics.h"

namespace khorovod::op {

namespace {
const char* kResults[] = {"success", "requeue", "error",
                          "terminal_error"};  // by ReconcileOutcome::Kind

std::vector<prometheus::MetricFamily> CollectState(const OperatorState& state) {
  auto phases = state.phase_counts();
  prometheus::MetricFamily jobs =
      metrics::GaugeFamily("khorovod_operator_jobs", "HorovodJobs in the cache by phase.");
  for (JobPhase p : kJobPhases)
    if (p != JobPhase::kNone)
      metrics::AddSample(jobs, phases.count(p) ? phases[p] : 0, {{"phase", ToString(p)}});
  const GpuTotals totals = state.gpus ? state.gpus() : GpuTotals{};
  prometheus::MetricFamily gpus =
      metrics::GaugeFamily("khorovod_operator_gpus",
                           "nvidia.com/gpu held by unfinished HorovodJobs' scheduled workers "
                           "(in_use) and asked for (wanted).");
  metrics::AddSample(gpus, static_cast<double>(totals.in_use), {{"state", "in_use"}});
  metrics::AddSample(gpus, static_cast<double>(totals.wanted), {{"state", "wanted"}});
  return {
      std::move(jobs),
      std::move(gpus),
      metrics::Gauge("khorovod_operator_workqueue_depth", "Job keys waiting to be reconciled.",
                     static_cast<double>(state.queue_depth())),
      metrics::Gauge("khorovod_operator_is_leader", "1 while this replica holds the leader lease.",
                     state.is_leader() ? 1 : 0),
      metrics::Counter("khorovod_operator_informer_lists_total",
                       "Full lists of HorovodJobs: 1 per start, plus 1 per re-list after 410 Gone.",
                       static_cast<double>(state.job_lists())),
      metrics::Counter("khorovod_operator_api_throttled_seconds_total",
                       "Time API requests waited for the client-side rate limit (--kube-api-qps).",
                       state.throttled_seconds ? state.throttled_seconds() : 0.0)};
}

}  // namespace

OperatorMetrics::OperatorMetrics(OperatorState state)
    : reconcile_seconds_(metrics::GetHistogram(registry_,
                                               "khorovod_operator_reconcile_duration_seconds",
                                               "Duration of one reconcile of one HorovodJob.",
                                               metrics::ExponentialBuckets(0.001, 2.5, 12))),
      scraped_([state = std::move(state)] { return CollectState(state); }) {
  // Every result exists from the start, so rate() works before the first error.
  for (const char* r : kResults)
    metrics::GetCounter(registry_, "khorovod_operator_reconcile_total", "Reconciles by result.",
                        {{"result", r}});
}

void OperatorMetrics::ObserveReconcile(const ReconcileOutcome& outcome, double seconds) {
  metrics::GetCounter(registry_, "khorovod_operator_reconcile_total", "Reconciles by result.",
                      {{"result", kResults[outcome.kind]}})
      .Increment();
  reconcile_seconds_.Observe(seconds);
}

void OperatorMetrics::ObserveRequest(const std::string& verb, const std::string& resource,
                                     int http_status, double seconds) {
  metrics::GetCounter(registry_, "khorovod_operator_api_requests_total",
                      "Kubernetes API requests by verb, resource and HTTP code.",
                      {{"verb", verb},
                       {"resource", resource},
                       {"code", http_status == 0 ? "error" : std::to_string(http_status)}})
      .Increment();
  metrics::GetHistogram(registry_, "khorovod_operator_api_request_duration_seconds",
                        "Kubernetes API request latency.",
                        metrics::ExponentialBuckets(0.001, 2.5, 12),
                        {{"verb", verb}, {"resource", resource}})
      .Observe(seconds);
}

}  // namespace khorovod::op
