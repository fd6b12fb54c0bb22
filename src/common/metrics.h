// Process metrics, rendered in the Prometheus text exposition format (0.0.4).
//
// Any layer may register metrics here (common/ sits below all of them); the
// admin HTTP server renders the registry at GET /metrics. Updating a Counter,
// Gauge or Histogram is a relaxed atomic operation, safe from any thread.
// Registering and rendering take the registry's mutex: register once at
// start-up or on topic creation, never per message.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace magnetar::common {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void inc(uint64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

class Gauge {
 public:
  void set(double v) { v_.store(v, std::memory_order_relaxed); }
  void add(double d) {
    double cur = v_.load(std::memory_order_relaxed);
    while (!v_.compare_exchange_weak(cur, cur + d, std::memory_order_relaxed)) {}
  }
  double value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0};
};

// Cumulative histogram with fixed upper bounds (seconds, bytes, ...).
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  // Non-cumulative count in bucket i (i == bounds().size() is +Inf).
  uint64_t bucket_count(size_t i) const { return counts_[i].load(std::memory_order_relaxed); }
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.value(); }

  // 1us .. ~1s, doubling: for latencies.
  static std::vector<double> latency_bounds();

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<uint64_t> count_{0};
  Gauge sum_;
};

// Writes samples at scrape time: for values that are cheaper to compute on
// demand (resident memory) or live in state owned by another thread.
class SampleWriter {
 public:
  // One sample line of a family declared with declare().
  virtual void sample(std::string_view name, const Labels& labels, double value) = 0;
  virtual ~SampleWriter() = default;
};

// kUntyped is for collectors only: a family whose established name (e.g.
// Pulsar's pulsar_producers_count) the text format's lint reserves for
// another type.
enum class MetricType { kCounter, kGauge, kHistogram, kUntyped };

class MetricsRegistry {
 public:
  // The process-wide registry.
  static MetricsRegistry& global();

  // Returns the series (name, labels), creating it on first use. The returned
  // reference stays valid until remove() or the registry dies.
  Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help,
                       std::vector<double> bounds, const Labels& labels = {});
  // Drops one series (e.g. when a topic is deleted).
  void remove(const std::string& name, const Labels& labels);

  // A collector runs at render time under the registry lock and must not
  // register metrics. It declares each family it writes with `declare`.
  using Collector = std::function<void(SampleWriter&)>;
  uint64_t add_collector(std::string name, std::string help, MetricType type, Collector fn);
  void remove_collector(uint64_t id);

  std::string render() const;

 private:
  struct Family {
    std::string help;
    MetricType type;
    std::map<Labels, std::unique_ptr<Counter>> counters;
    std::map<Labels, std::unique_ptr<Gauge>> gauges;
    std::map<Labels, std::unique_ptr<Histogram>> histograms;
  };
  struct CollectorEntry {
    std::string name;
    std::string help;
    MetricType type;
    Collector fn;
  };
  Family& family(const std::string& name, const std::string& help, MetricType type);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
  std::map<uint64_t, CollectorEntry> collectors_;
  uint64_t next_collector_id_ = 1;
};

// Escapes a label value for the text format.
std::string escape_label_value(std::string_view v);

}  // namespace magnetar::common
