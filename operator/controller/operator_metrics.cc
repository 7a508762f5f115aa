#include "controller/operator_metrics.h"

namespace khorovod::op {

namespace {
const char* kResults[] = {"success", "requeue", "error", "terminal_error"};  // by ReconcileOutcome::Kind
}  // namespace

OperatorMetrics::OperatorMetrics(OperatorState state)
    : reconcile_seconds_(registry_.GetHistogram("khorovod_operator_reconcile_duration_seconds",
                                                "Duration of one reconcile of one HorovodJob.",
                                                metrics::ExponentialBuckets(0.001, 2.5, 12))) {
  // Every result exists from the start, so rate() works before the first error.
  for (const char* r : kResults)
    registry_.GetCounter("khorovod_operator_reconcile_total", "Reconciles by result.", {{"result", r}});
  registry_.AddCollector([state](metrics::TextWriter& w) {
    auto phases = state.phase_counts();
    w.Family("khorovod_operator_jobs", metrics::MetricType::kGauge, "HorovodJobs in the cache by phase.");
    for (JobPhase p : kJobPhases)
      if (p != JobPhase::kNone) w.Sample("khorovod_operator_jobs", phases.count(p) ? phases[p] : 0, {{"phase", ToString(p)}});
    const GpuTotals gpus = state.gpus ? state.gpus() : GpuTotals{};
    w.Family("khorovod_operator_gpus", metrics::MetricType::kGauge,
             "nvidia.com/gpu held by unfinished HorovodJobs' scheduled workers (in_use) and asked for (wanted).");
    w.Sample("khorovod_operator_gpus", static_cast<double>(gpus.in_use), {{"state", "in_use"}});
    w.Sample("khorovod_operator_gpus", static_cast<double>(gpus.wanted), {{"state", "wanted"}});
    w.Gauge("khorovod_operator_workqueue_depth", "Job keys waiting to be reconciled.",
            static_cast<double>(state.queue_depth()));
    w.Gauge("khorovod_operator_is_leader", "1 while this replica holds the leader lease.", state.is_leader() ? 1 : 0);
    w.Counter("khorovod_operator_informer_lists_total",
              "Full lists of HorovodJobs: 1 per start, plus 1 per re-list after 410 Gone.",
              static_cast<double>(state.job_lists()));
    w.Counter("khorovod_operator_api_throttled_seconds_total",
              "Time API requests waited for the client-side rate limit (--kube-api-qps).",
              state.throttled_seconds ? state.throttled_seconds() : 0.0);
  });
}

void OperatorMetrics::ObserveReconcile(const ReconcileOutcome& outcome, double seconds) {
  registry_.GetCounter("khorovod_operator_reconcile_total", "Reconciles by result.", {{"result", kResults[outcome.kind]}})
      .Increment();
  reconcile_seconds_.Observe(seconds);
}

void OperatorMetrics::ObserveRequest(const std::string& verb, const std::string& resource, int http_status,
                                     double seconds) {
  registry_
      .GetCounter("khorovod_operator_api_requests_total", "Kubernetes API requests by verb, resource and HTTP code.",
                  {{"verb", verb}, {"resource", resource}, {"code", http_status == 0 ? "error" : std::to_string(http_status)}})
      .Increment();
  registry_
      .GetHistogram("khorovod_operator_api_request_duration_seconds", "Kubernetes API request latency.",
                    metrics::ExponentialBuckets(0.001, 2.5, 12), {{"verb", verb}, {"resource", resource}})
      .Observe(seconds);
}

}  // namespace khorovod::op
