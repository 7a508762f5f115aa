#include "controller/operator_metrics.h"

#include "metrics_text.h"

namespace khorovod::op {

using rendezvous::MetricsText;

void OperatorMetrics::Histogram::Observe(double v) {
  for (size_t i = 0; i < kBounds.size(); ++i)
    if (v <= kBounds[i]) buckets[i]++;
  count++;
  sum += v;
}

void OperatorMetrics::ObserveReconcile(const ReconcileOutcome& outcome, double seconds) {
  static const char* kNames[] = {"success", "requeue_after", "error", "terminal_error"};
  std::lock_guard<std::mutex> lock(mu_);
  reconciles_[kNames[outcome.kind]]++;
  reconcile_seconds_.Observe(seconds);
}

void OperatorMetrics::ObserveRequest(const std::string& verb, const std::string& resource, int http_status,
                                     double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  requests_[{verb, resource, http_status == 0 ? "error" : std::to_string(http_status)}]++;
  request_seconds_[verb].Observe(seconds);
}

std::string OperatorMetrics::Render(const Controller& controller, bool is_leader) const {
  MetricsText m;
  std::lock_guard<std::mutex> lock(mu_);
  m.Family("khorovod_operator_reconcile_total", MetricsText::Type::kCounter, "Reconciles by result.");
  for (const char* r : {"success", "requeue_after", "error", "terminal_error"}) {
    auto it = reconciles_.find(r);
    m.Sample("khorovod_operator_reconcile_total", it == reconciles_.end() ? 0 : static_cast<double>(it->second),
             {{"result", r}});
  }
  m.Family("khorovod_operator_jobs", MetricsText::Type::kGauge, "HorovodJobs in the cache by phase.");
  auto phases = controller.PhaseCounts();
  for (const char* p : {"Created", "Running", "Restarting", "Scaling", "Suspended", "Succeeded", "Failed"})
    m.Sample("khorovod_operator_jobs", phases.count(p) ? phases[p] : 0, {{"phase", p}});
  m.Gauge("khorovod_operator_workqueue_depth", "Job keys waiting to be reconciled.",
          static_cast<double>(controller.QueueDepth()));
  m.Gauge("khorovod_operator_is_leader", "1 when this replica holds the leader lease.", is_leader ? 1 : 0);
  m.Counter("khorovod_operator_informer_lists_total", "Full lists of HorovodJobs (1 + re-lists after 410 Gone).",
            static_cast<double>(controller.JobListCount()));
  m.Family("khorovod_operator_api_requests_total", MetricsText::Type::kCounter,
           "API server requests by verb, resource and HTTP code.");
  for (const auto& [k, v] : requests_)
    m.Sample("khorovod_operator_api_requests_total", static_cast<double>(v),
             {{"verb", std::get<0>(k)}, {"resource", std::get<1>(k)}, {"code", std::get<2>(k)}});
  return m.text();
}

}  // namespace khorovod::op
