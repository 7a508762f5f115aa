// Exposition: see khorovod/metrics/exposition.h.
#include "khorovod/metrics/exposition.h"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <stdexcept>

namespace khorovod::metrics {

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  if (!(start > 0) || !(factor > 1) || count < 1) {
    throw std::invalid_argument("ExponentialBuckets needs start > 0, factor > 1, count >= 1");
  }
  std::vector<double> out;
  for (int i = 0; i < count; ++i, start *= factor) out.push_back(start);
  return out;
}

prometheus::Counter& GetCounter(prometheus::Registry& registry, const std::string& name,
                                const std::string& help, const prometheus::Labels& labels) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add(labels);
}

prometheus::Gauge& GetGauge(prometheus::Registry& registry, const std::string& name,
                            const std::string& help, const prometheus::Labels& labels) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add(labels);
}

prometheus::Histogram& GetHistogram(prometheus::Registry& registry, const std::string& name,
                                    const std::string& help, const std::vector<double>& bounds,
                                    const prometheus::Labels& labels) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add(labels, bounds);
}

std::string Render(std::initializer_list<const prometheus::Collectable*> sources) {
  std::vector<prometheus::MetricFamily> families;
  for (const prometheus::Collectable* source : sources) {
    for (prometheus::MetricFamily& f : source->Collect()) families.push_back(std::move(f));
  }
  std::stable_sort(families.begin(), families.end(),
                   [](const auto& a, const auto& b) { return a.name < b.name; });
  for (prometheus::MetricFamily& f : families) {
    std::stable_sort(f.metric.begin(), f.metric.end(),
                     [](const auto& a, const auto& b) { return a.label < b.label; });
  }
  return prometheus::TextSerializer().Serialize(families);
}

namespace {

prometheus::MetricFamily Family(std::string name, std::string help, prometheus::MetricType type) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

}  // namespace

prometheus::MetricFamily GaugeFamily(std::string name, std::string help) {
  return Family(std::move(name), std::move(help), prometheus::MetricType::Gauge);
}

prometheus::MetricFamily CounterFamily(std::string name, std::string help) {
  return Family(std::move(name), std::move(help), prometheus::MetricType::Counter);
}

void AddSample(prometheus::MetricFamily& family, double value, const prometheus::Labels& labels) {
  prometheus::ClientMetric m;
  for (const auto& [name, label_value] : labels) m.label.push_back({name, label_value});
  if (family.type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else if (family.type == prometheus::MetricType::Gauge) {
    m.gauge.value = value;
  } else {
    throw std::invalid_argument("metric '" + family.name +
                                "': AddSample takes gauges and counters only");
  }
  family.metric.push_back(std::move(m));
}

prometheus::MetricFamily Gauge(std::string name, std::string help, double value) {
  prometheus::MetricFamily f = GaugeFamily(std::move(name), std::move(help));
  AddSample(f, value);
  return f;
}

prometheus::MetricFamily Counter(std::string name, std::string help, double value) {
  prometheus::MetricFamily f = CounterFamily(std::move(name), std::move(help));
  AddSample(f, value);
  return f;
}

}  // namespace khorovod::metrics
