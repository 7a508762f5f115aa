// TextWriter: a writer for the Prometheus text exposition format, version
// 0.0.4 (Content-Type kContentType). The Registry (registry.h) renders
// through it; collectors that compute values at scrape time write through it
// directly.
//
//   TextWriter w;
//   w.Family("khorovod_rendezvous_generation", MetricType::kGauge, "Current generation.");
//   w.Sample("khorovod_rendezvous_generation", 3);
//   w.Family("http_requests_total", MetricType::kCounter, "Requests by code.");
//   w.Sample("http_requests_total", 12, {{"code", "200"}});
//   std::string body = w.text();
//
// Contract: every family gets exactly one "# HELP" and one "# TYPE" line,
// written by Family() before its samples; a family's samples must follow it
// without another family in between (the format requires families to be
// contiguous). Help text and label values are escaped as the format
// requires. Metric and label names are checked against
// [a-zA-Z_:][a-zA-Z0-9_:]* and an invalid one throws std::invalid_argument:
// names are chosen by code, so a bad one is a programming error.
//
// Thread-safety: a plain value; synchronize externally to share one.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace khorovod::metrics {

enum class MetricType { kCounter, kGauge, kHistogram, kUntyped };

// Label name/value pairs in the order they are printed.
using Labels = std::vector<std::pair<std::string, std::string>>;

class TextWriter {
 public:
  static constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

  // Starts a metric family: writes its HELP and TYPE lines.
  void Family(std::string_view name, MetricType type, std::string_view help);
  // Writes one sample line. For a histogram family `name` is the family name
  // plus "_bucket", "_sum" or "_count".
  void Sample(std::string_view name, double value, const Labels& labels = {});

  // A family with a single unlabelled sample.
  void Gauge(std::string_view name, std::string_view help, double value);
  void Counter(std::string_view name, std::string_view help, double value);

  const std::string& text() const { return out_; }
  std::string take() { return std::move(out_); }

  static bool IsValidName(std::string_view name);
  // Shortest round-tripping form; integers without a dot; NaN, +Inf, -Inf.
  static std::string FormatValue(double value);

 private:
  std::string out_;
};

}  // namespace khorovod::metrics
