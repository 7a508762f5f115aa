// Registry: the one place khorovod keeps Prometheus metrics. The worker
// runtime, the rendezvous server and the operator each own one Registry
// (there is no process-wide default) and serve Render() over HTTP
// (http_endpoint.h). docs/observability.md lists every metric khorovod
// exports.
//
//   metrics::Registry reg;
//   metrics::Counter& bytes = reg.GetCounter("khorovod_worker_collective_bytes_total",
//                                            "Bytes reduced, by operation.", {{"op", "allreduce"}});
//   metrics::Histogram& lat = reg.GetHistogram("x_duration_seconds", "Latency.",
//                                              metrics::ExponentialBuckets(0.001, 2, 12));
//   bytes.Increment(4096);            // lock-free, no allocation
//   lat.Observe(0.012);
//   std::string body = reg.Render();  // text format 0.0.4
//
// Contract:
//  * Get*() creates the family on first use and the labelled child on first
//    use of its label values; later calls with the same name and label
//    values return the same object. The reference stays valid as long as the
//    Registry. Get*() takes a lock and may allocate: call it once and keep
//    the reference on hot paths.
//  * A name reused with another type, another help text, other label names
//    (the same names in the same order are required) or other histogram
//    bounds throws std::invalid_argument, as does an invalid metric or label
//    name, or the label "le" (reserved for histogram buckets). These are
//    programming errors: names are fixed in code.
//  * Counter::Increment with a negative or NaN amount is ignored: counters
//    only go up, and a scrape must never see one fall.
//  * Collectors add families computed at scrape time (e.g. from a state
//    machine's statistics). They run in registration order, after the
//    registry's own families, without the registry lock held, and must not
//    write a family name that the registry also holds.
//
// Thread-safety: every method of Registry, Counter, Gauge and Histogram may
// be called concurrently from any thread. Counter, Gauge and Histogram
// updates are lock-free atomics. Render() reads each value atomically, but
// not all values at one instant.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "khorovod/metrics/text_writer.h"

namespace khorovod::metrics {

class Counter {
 public:
  void Increment(double amount = 1.0);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double delta);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  // `bounds`: strictly increasing, finite bucket upper bounds; the +Inf
  // bucket is implicit. Invalid bounds throw std::invalid_argument.
  explicit Histogram(std::vector<double> bounds);

  void Observe(double value);  // NaN is ignored

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf (== count)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // non-cumulative, bounds_.size() + 1
  std::atomic<double> sum_{0.0};
};

// `count` bounds: start, start*factor, start*factor^2, ...
std::vector<double> ExponentialBuckets(double start, double factor, int count);

class Registry {
 public:
  using Collector = std::function<void(TextWriter&)>;

  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  Counter& GetCounter(std::string_view name, std::string_view help, const Labels& labels = {});
  Gauge& GetGauge(std::string_view name, std::string_view help, const Labels& labels = {});
  Histogram& GetHistogram(std::string_view name, std::string_view help, const std::vector<double>& bounds,
                          const Labels& labels = {});

  void AddCollector(Collector collector);

  // The exposition of every family (sorted by name), then the collectors'.
  std::string Render() const;

 private:
  struct Family;
  Family& FamilyFor(std::string_view name, MetricType type, std::string_view help, const Labels& labels,
                    const std::vector<double>* bounds);  // mu_ held

  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Family>, std::less<>> families_;
  std::vector<Collector> collectors_;
};

}  // namespace khorovod::metrics
