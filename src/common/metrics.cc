#include "common/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace magnetar::common {
namespace {

std::string_view type_name(MetricType t) {
  switch (t) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
    case MetricType::kUntyped: return "untyped";
  }
  return "untyped";
}

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

void append_labels(std::string& out, const Labels& labels, std::string_view extra_key = {},
                   std::string_view extra_value = {}) {
  if (labels.empty() && extra_key.empty()) return;
  out += '{';
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ',';
    first = false;
    out += k;
    out += "=\"";
    out += escape_label_value(v);
    out += '"';
  }
  if (!extra_key.empty()) {
    if (!first) out += ',';
    out += extra_key;
    out += "=\"";
    out += extra_value;
    out += '"';
  }
  out += '}';
}

void append_sample(std::string& out, std::string_view name, const Labels& labels, double v) {
  out += name;
  append_labels(out, labels);
  out += ' ';
  out += format_value(v);
  out += '\n';
}

void append_header(std::string& out, std::string_view name, std::string_view help, MetricType t) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name,
                 type_name(t));
}

class StringSampleWriter final : public SampleWriter {
 public:
  explicit StringSampleWriter(std::string& out) : out_(out) {}
  void sample(std::string_view name, const Labels& labels, double value) override {
    append_sample(out_, name, labels, value);
  }

 private:
  std::string& out_;
};

}  // namespace

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  std::sort(bounds_.begin(), bounds_.end());
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::observe(double v) {
  size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_.add(v);
}

std::vector<double> Histogram::latency_bounds() {
  std::vector<double> b;
  for (double v = 1e-6; v < 1.1; v *= 2) b.push_back(v);
  return b;
}

MetricsRegistry& MetricsRegistry::global() {
  static MetricsRegistry* registry = new MetricsRegistry();  // never destroyed: threads may outlive main
  return *registry;
}

MetricsRegistry::Family& MetricsRegistry::family(const std::string& name, const std::string& help,
                                                 MetricType type) {
  auto [it, inserted] = families_.try_emplace(name);
  if (inserted) {
    it->second.help = help;
    it->second.type = type;
  }
  return it->second;
}

Counter& MetricsRegistry::counter(const std::string& name, const std::string& help,
                                  const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& slot = family(name, help, MetricType::kCounter).counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Gauge& MetricsRegistry::gauge(const std::string& name, const std::string& help,
                              const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& slot = family(name, help, MetricType::kGauge).gauges[labels];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Histogram& MetricsRegistry::histogram(const std::string& name, const std::string& help,
                                      std::vector<double> bounds, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& slot = family(name, help, MetricType::kHistogram).histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>(std::move(bounds));
  return *slot;
}

void MetricsRegistry::remove(const std::string& name, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return;
  it->second.counters.erase(labels);
  it->second.gauges.erase(labels);
  it->second.histograms.erase(labels);
}

uint64_t MetricsRegistry::add_collector(std::string name, std::string help, MetricType type,
                                        Collector fn) {
  std::lock_guard lock(mu_);
  uint64_t id = next_collector_id_++;
  collectors_.emplace(id, CollectorEntry{std::move(name), std::move(help), type, std::move(fn)});
  return id;
}

void MetricsRegistry::remove_collector(uint64_t id) {
  std::lock_guard lock(mu_);
  collectors_.erase(id);
}

std::string MetricsRegistry::render() const {
  std::string out;
  out.reserve(4096);
  std::lock_guard lock(mu_);
  for (const auto& [name, fam] : families_) {
    if (fam.counters.empty() && fam.gauges.empty() && fam.histograms.empty()) continue;
    append_header(out, name, fam.help, fam.type);
    for (const auto& [labels, c] : fam.counters) append_sample(out, name, labels, static_cast<double>(c->value()));
    for (const auto& [labels, g] : fam.gauges) append_sample(out, name, labels, g->value());
    for (const auto& [labels, h] : fam.histograms) {
      uint64_t cumulative = 0;
      std::string bucket_name = name + "_bucket";
      for (size_t i = 0; i <= h->bounds().size(); ++i) {
        cumulative += h->bucket_count(i);
        std::string le = i < h->bounds().size() ? format_value(h->bounds()[i]) : "+Inf";
        out += bucket_name;
        append_labels(out, labels, "le", le);
        out += ' ';
        out += format_value(static_cast<double>(cumulative));
        out += '\n';
      }
      append_sample(out, name + "_sum", labels, h->sum());
      append_sample(out, name + "_count", labels, static_cast<double>(h->count()));
    }
  }
  StringSampleWriter writer(out);
  for (const auto& [id, c] : collectors_) {
    append_header(out, c.name, c.help, c.type);
    c.fn(writer);
  }
  return out;
}

}  // namespace magnetar::common
