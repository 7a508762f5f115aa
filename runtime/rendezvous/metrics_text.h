// MetricsText: a minimal writer for the Prometheus text exposition format,
// version 0.0.4 (Content-Type "text/plain; version=0.0.4; charset=utf-8").
//
// Usage:
//   MetricsText m;
//   m.Gauge("khorovod_rendezvous_generation", "Current generation.", 3);
//   m.Family("http_requests_total", MetricsText::Type::kCounter, "Requests by code.");
//   m.Sample("http_requests_total", 12, {{"code", "200"}});
//   std::string body = m.text();
//
// Every family gets exactly one "# HELP" and one "# TYPE" line, written by
// Family() (or the Gauge/Counter shorthands) before its samples. Help text and
// label values are escaped as the format requires; metric and label names are
// checked against [a-zA-Z_:][a-zA-Z0-9_:]* and an invalid one throws
// std::invalid_argument (it is a programming error, not an input error).
//
// Thread-safety: a plain value; synchronize externally to share one.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace khorovod::rendezvous {

class MetricsText {
 public:
  enum class Type { kCounter, kGauge, kUntyped };
  using Labels = std::vector<std::pair<std::string, std::string>>;

  // Starts a metric family: writes its HELP and TYPE lines.
  void Family(std::string_view name, Type type, std::string_view help);
  // Writes one sample line of the family started last.
  void Sample(std::string_view name, double value, const Labels& labels = {});

  // A family with a single unlabelled sample.
  void Gauge(std::string_view name, std::string_view help, double value);
  void Counter(std::string_view name, std::string_view help, double value);

  const std::string& text() const { return out_; }

  static constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

  // Exposed for tests.
  static bool IsValidName(std::string_view name);
  static std::string FormatValue(double value);

 private:
  std::string out_;
};

}  // namespace khorovod::rendezvous
