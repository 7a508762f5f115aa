// Exposition: the little khorovod adds to the Prometheus C++ client
// (prometheus-cpp, Debian's prometheus-cpp-dev). Metrics live in a
// prometheus::Registry, registered through prometheus::BuildCounter/
// BuildGauge/BuildHistogram (GetCounter etc. below are those builders in one
// call); this header adds what every owner of a registry needs:
//
//   prometheus::Registry reg;
//   prometheus::Histogram& seconds = metrics::GetHistogram(reg, "x_duration_seconds", "Latency.",
//                                                          metrics::ExponentialBuckets(0.001, 2,
//                                                          12));
//   metrics::GetCounter(reg, "x_total", "Things.", {{"kind", "a"}}).Increment();
//   metrics::ScrapeCollector computed([] {      // families computed at scrape time
//     prometheus::MetricFamily f = metrics::GaugeFamily("x_queue_depth", "Queued items.");
//     metrics::AddSample(f, 3);
//     return std::vector<prometheus::MetricFamily>{f};
//   });
//   std::string body = metrics::Render({&reg, &computed});   // text format 0.0.4
//
// Contract:
//  * Get*() registers the family on first use of its name and the child on
//    first use of its label values; later calls return the same objects
//    (prometheus-cpp's Merge behaviour), valid as long as the registry. They
//    lock and may allocate: keep the reference on hot paths. A name reused
//    with another type, or an invalid metric or label name, throws
//    std::invalid_argument (names are fixed in code: a programming error).
//  * Render() serializes every source with prometheus::TextSerializer, the
//    families sorted by name and each family's samples by label values, so
//    a scrape is deterministic (prometheus-cpp keeps children in a hash map).
//    A family name must appear in one source only.
//  * Help texts and label values are written by prometheus-cpp; help texts
//    must not contain a backslash or a newline (it does not escape them in
//    HELP lines; every help text is a fixed string in code).
//  * ExponentialBuckets() with start <= 0, factor <= 1 or count < 1 throws
//    std::invalid_argument (bounds are fixed in code: a programming error).
//
// Thread-safety: Render() may run concurrently with updates of the sources
// (prometheus-cpp's registry and metrics are thread-safe); a ScrapeCollector's
// function must be safe to call from the serving threads.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/labels.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace khorovod::metrics {

// The Content-Type of the text exposition format 0.0.4.
inline constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

// `count` bounds: start, start*factor, start*factor^2, ...
std::vector<double> ExponentialBuckets(double start, double factor, int count);

prometheus::Counter& GetCounter(prometheus::Registry& registry, const std::string& name,
                                const std::string& help, const prometheus::Labels& labels = {});
prometheus::Gauge& GetGauge(prometheus::Registry& registry, const std::string& name,
                            const std::string& help, const prometheus::Labels& labels = {});
prometheus::Histogram& GetHistogram(prometheus::Registry& registry, const std::string& name,
                                    const std::string& help, const std::vector<double>& bounds,
                                    const prometheus::Labels& labels = {});

std::string Render(std::initializer_list<const prometheus::Collectable*> sources);

// Families whose values are read at scrape time (a state machine's
// statistics, a queue's depth) rather than mirrored into gauges.
class ScrapeCollector : public prometheus::Collectable {
 public:
  using CollectFn = std::function<std::vector<prometheus::MetricFamily>()>;
  explicit ScrapeCollector(CollectFn collect) : collect_(std::move(collect)) {}
  std::vector<prometheus::MetricFamily> Collect() const override { return collect_(); }

 private:
  const CollectFn collect_;
};

prometheus::MetricFamily GaugeFamily(std::string name, std::string help);
prometheus::MetricFamily CounterFamily(std::string name, std::string help);
// One sample of a gauge or counter family.
void AddSample(prometheus::MetricFamily& family, double value,
               const prometheus::Labels& labels = {});
// A family with a single unlabelled sample.
prometheus::MetricFamily Gauge(std::string name, std::string help, double value);
prometheus::MetricFamily Counter(std::string name, std::string help, double value);

}  // namespace khorovod::metrics
