// OperatorMetrics: the operator's Prometheus metrics (names listed in
// docs/observability.md, used by the Grafana dashboard and alert rules).
//
//   khorovod_operator_reconcile_total{result}              counter
//   khorovod_operator_reconcile_duration_seconds           histogram
//   khorovod_operator_jobs{phase}                          gauge
//   khorovod_operator_workqueue_depth                      gauge
//   khorovod_operator_is_leader                            gauge
//   khorovod_operator_api_requests_total{verb,resource,code}  counter
//   khorovod_operator_api_request_duration_seconds{verb}   histogram
//   khorovod_operator_informer_lists_total                 counter (re-lists after 410 show here)
//
// Thread-safety: Observe* may be called from any thread; Render too.
#pragma once

#include <array>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "controller/controller.h"

namespace khorovod::op {

class OperatorMetrics {
 public:
  static constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

  void ObserveReconcile(const ReconcileOutcome& outcome, double seconds);
  void ObserveRequest(const std::string& verb, const std::string& resource, int http_status, double seconds);
  std::string Render(const Controller& controller, bool is_leader) const;

 private:
  struct Histogram {
    static constexpr std::array<double, 12> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                       0.1,   0.25,   0.5,   1,    2.5,   10};
    std::array<uint64_t, 12> buckets{};
    uint64_t count = 0;
    double sum = 0;
    void Observe(double v);
  };
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> reconciles_;  // result -> count
  Histogram reconcile_seconds_;
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t> requests_;
  std::map<std::string, Histogram> request_seconds_;  // by verb
};

}  // namespace khorovod::op
