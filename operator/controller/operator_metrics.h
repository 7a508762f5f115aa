// OperatorMetrics: the operator's Prometheus metrics, kept in a
// prometheus::Registry (prometheus-cpp) and rendered by
// khorovod/metrics/exposition.h.
// docs/observability.md lists them; the dashboard and alert rules use them.
//
//   khorovod_operator_reconcile_total{result}                    counter
//       result: success | requeue | error (retried) | terminal_error
//   khorovod_operator_reconcile_duration_seconds                 histogram
//   khorovod_operator_api_requests_total{verb,resource,code}     counter (code "error": no answer)
//   khorovod_operator_api_request_duration_seconds{verb,resource} histogram
//   khorovod_operator_jobs{phase}                                gauge, at scrape time
//   khorovod_operator_gpus{state}                                gauge, at scrape time
//       state: in_use (held by unfinished jobs' scheduled workers) | wanted
//   khorovod_operator_workqueue_depth                            gauge, at scrape time
//   khorovod_operator_is_leader                                  gauge, at scrape time
//   khorovod_operator_informer_lists_total                       counter, at scrape time
//       (1 per informer start; each re-list after 410 Gone adds one)
//   khorovod_operator_api_throttled_seconds_total                counter, at scrape time
//       (time requests waited for the client-side rate limit, --kube-api-qps)
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "controller/reconciler.h"
#include "khorovod/metrics/exposition.h"

namespace khorovod::op {

// What the scrape-time gauges read.
struct OperatorState {
  std::function<std::map<JobPhase, int>()> phase_counts;
  std::function<size_t()> queue_depth;
  std::function<bool()> is_leader;
  std::function<uint64_t()> job_lists;
  std::function<double()> throttled_seconds;
  std::function<GpuTotals()> gpus;
};

class OperatorMetrics {
 public:
  explicit OperatorMetrics(OperatorState state);
  void ObserveReconcile(const ReconcileOutcome& outcome, double seconds);
  void ObserveRequest(const std::string& verb, const std::string& resource, int http_status,
                      double seconds);
  std::string Render() const { return metrics::Render({&registry_, &scraped_}); }

 private:
  prometheus::Registry registry_;
  prometheus::Histogram& reconcile_seconds_;
  const metrics::ScrapeCollector scraped_;  // the families read from OperatorState at scrape time
};

}  // namespace khorovod::op
