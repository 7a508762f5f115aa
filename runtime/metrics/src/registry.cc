// Registry, Counter, Gauge, Histogram: see khorovod/metrics/registry.h.
#include "khorovod/metrics/registry.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace khorovod::metrics {
namespace {

void AtomicAdd(std::atomic<double>& target, double delta) {
  double current = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(current, current + delta, std::memory_order_relaxed)) {
  }
}

[[noreturn]] void Misuse(std::string_view name, const std::string& what) {
  throw std::invalid_argument("metric '" + std::string(name) + "': " + what);
}

}  // namespace

void Counter::Increment(double amount) {
  if (!(amount > 0)) return;  // negative, zero and NaN
  AtomicAdd(value_, amount);
}

void Gauge::Add(double delta) { AtomicAdd(value_, delta); }

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i]) || (i > 0 && bounds_[i] <= bounds_[i - 1])) {
      throw std::invalid_argument("histogram bounds must be finite and strictly increasing");
    }
  }
  buckets_ = std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1);
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value) {
  if (std::isnan(value)) return;
  // First bound >= value: Prometheus buckets are "less than or equal".
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(sum_, value);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.cumulative.resize(bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = running;
  }
  // Derived from the buckets so that _count always equals the +Inf bucket.
  s.count = running;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  if (!(start > 0) || !(factor > 1) || count < 1) {
    throw std::invalid_argument("ExponentialBuckets needs start > 0, factor > 1, count >= 1");
  }
  std::vector<double> out;
  for (int i = 0; i < count; ++i, start *= factor) out.push_back(start);
  return out;
}

// One metric family; children are keyed (and printed) by their label values.
struct Registry::Family {
  MetricType type;
  std::string help;
  std::vector<std::string> label_names;
  std::vector<double> bounds;  // histograms
  std::map<std::vector<std::string>, std::unique_ptr<Counter>> counters;
  std::map<std::vector<std::string>, std::unique_ptr<Gauge>> gauges;
  std::map<std::vector<std::string>, std::unique_ptr<Histogram>> histograms;
};

Registry::Registry() = default;
Registry::~Registry() = default;

Registry::Family& Registry::FamilyFor(std::string_view name, MetricType type, std::string_view help,
                                      const Labels& labels, const std::vector<double>* bounds) {
  std::vector<std::string> label_names;
  for (const auto& [key, value] : labels) label_names.push_back(key);
  auto it = families_.find(name);
  if (it == families_.end()) {
    if (!TextWriter::IsValidName(name)) Misuse(name, "invalid metric name");
    for (const std::string& key : label_names) {
      if (!TextWriter::IsValidName(key) || key.rfind("__", 0) == 0) Misuse(name, "invalid label name '" + key + "'");
      if (type == MetricType::kHistogram && key == "le") Misuse(name, "label 'le' is reserved for histograms");
    }
    auto family = std::make_unique<Family>();
    family->type = type;
    family->help = std::string(help);
    family->label_names = label_names;
    if (bounds) family->bounds = *bounds;
    it = families_.emplace(std::string(name), std::move(family)).first;
  }
  Family& f = *it->second;
  if (f.type != type) Misuse(name, "registered again with another type");
  if (f.help != help) Misuse(name, "registered again with another help text");
  if (f.label_names != label_names) Misuse(name, "registered again with other label names");
  if (bounds && f.bounds != *bounds) Misuse(name, "registered again with other histogram bounds");
  return f;
}

namespace {

std::vector<std::string> ValuesOf(const Labels& labels) {
  std::vector<std::string> values;
  for (const auto& [key, value] : labels) values.push_back(value);
  return values;
}

template <typename T, typename Make>
T& ChildOf(std::map<std::vector<std::string>, std::unique_ptr<T>>& children, const Labels& labels, Make make) {
  auto values = ValuesOf(labels);
  auto it = children.find(values);
  if (it == children.end()) it = children.emplace(std::move(values), make()).first;
  return *it->second;
}

Labels Zip(const std::vector<std::string>& names, const std::vector<std::string>& values) {
  Labels out;
  for (size_t i = 0; i < names.size(); ++i) out.emplace_back(names[i], values[i]);
  return out;
}

}  // namespace

Counter& Registry::GetCounter(std::string_view name, std::string_view help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = FamilyFor(name, MetricType::kCounter, help, labels, nullptr);
  return ChildOf(f.counters, labels, [] { return std::make_unique<Counter>(); });
}

Gauge& Registry::GetGauge(std::string_view name, std::string_view help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = FamilyFor(name, MetricType::kGauge, help, labels, nullptr);
  return ChildOf(f.gauges, labels, [] { return std::make_unique<Gauge>(); });
}

Histogram& Registry::GetHistogram(std::string_view name, std::string_view help, const std::vector<double>& bounds,
                                  const Labels& labels) {
  Histogram probe(bounds);  // validates the bounds before anything is registered
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = FamilyFor(name, MetricType::kHistogram, help, labels, &bounds);
  return ChildOf(f.histograms, labels, [&] { return std::make_unique<Histogram>(bounds); });
}

void Registry::AddCollector(Collector collector) {
  std::lock_guard<std::mutex> lock(mu_);
  collectors_.push_back(std::move(collector));
}

std::string Registry::Render() const {
  TextWriter w;
  std::vector<Collector> collectors;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, f] : families_) {
      w.Family(name, f->type, f->help);
      for (const auto& [values, c] : f->counters) w.Sample(name, c->Value(), Zip(f->label_names, values));
      for (const auto& [values, g] : f->gauges) w.Sample(name, g->Value(), Zip(f->label_names, values));
      for (const auto& [values, h] : f->histograms) {
        const Histogram::Snapshot s = h->Read();
        Labels labels = Zip(f->label_names, values);
        labels.emplace_back("le", "");
        for (size_t i = 0; i < s.cumulative.size(); ++i) {
          labels.back().second = i < f->bounds.size() ? TextWriter::FormatValue(f->bounds[i]) : "+Inf";
          w.Sample(name + "_bucket", double(s.cumulative[i]), labels);
        }
        labels.pop_back();
        w.Sample(name + "_sum", s.sum, labels);
        w.Sample(name + "_count", double(s.count), labels);
      }
    }
    collectors = collectors_;
  }
  for (const Collector& c : collectors) c(w);
  return w.take();
}

}  // namespace khorovod::metrics
