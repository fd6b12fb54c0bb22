#include "broker/bundle_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>

#include "broker/ownership.h"
#include "common/logging.h"
#include "metadata/blocking.h"

namespace magnetar::broker {

using common::Result;
using common::Status;

namespace {

constexpr std::string_view kLayoutsRoot = "/bundle-layouts";

// The process's view: "tenant/namespace" -> its layout, for split namespaces only.
struct LayoutView {
  // Whether `split` holds anything: read without the lock, so that while no
  // namespace is split (the usual case) bundle_of takes no lock.
  std::atomic<bool> any{false};
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const Boundaries>, std::less<>> split;
};

LayoutView& view() {
  static LayoutView* v = new LayoutView();  // never destroyed: reached from threads that outlive main's statics
  return *v;
}

Result<uint32_t> parse_hash(std::string_view text) {
  if (text.size() != 10 || text.substr(0, 2) != "0x") {
    return Status::invalid_argument("'" + std::string(text) + "' is not a 32-bit hash written 0x########");
  }
  uint32_t value = 0;
  for (char c : text.substr(2)) {
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    if (digit < 0) return Status::invalid_argument("'" + std::string(text) + "' is not a hexadecimal hash");
    value = value * 16 + static_cast<uint32_t>(digit);
  }
  return value;
}

}  // namespace

Boundaries default_boundaries() {
  Boundaries b;
  const uint64_t width = (uint64_t{1} << 32) / kBundlesPerNamespace;
  for (uint64_t i = 0; i < kBundlesPerNamespace; ++i) b.push_back(static_cast<uint32_t>(i * width));
  b.push_back(0xffffffffu);
  return b;
}

std::string encode_boundaries(const Boundaries& boundaries) {
  std::string out;
  for (uint32_t b : boundaries) {
    if (!out.empty()) out += ',';
    out += fmt::format("0x{:08x}", b);
  }
  return out;
}

Result<Boundaries> decode_boundaries(std::string_view text) {
  Boundaries out;
  while (!text.empty()) {
    size_t comma = text.find(',');
    auto value = parse_hash(text.substr(0, comma));
    if (!value.is_ok()) return value.status();
    if (!out.empty() && *value <= out.back()) return Status::invalid_argument("bundle boundaries must ascend");
    out.push_back(*value);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  if (out.size() < 2 || out.size() > kMaxBundlesPerNamespace + 1 || out.front() != 0 || out.back() != 0xffffffffu) {
    return Status::invalid_argument("bundle boundaries must run from 0x00000000 to 0xffffffff, with at most " +
                                    std::to_string(kMaxBundlesPerNamespace) + " bundles");
  }
  return out;
}

std::string range_name(uint32_t low, uint32_t high) { return fmt::format("0x{:08x}_0x{:08x}", low, high); }

Result<std::pair<uint32_t, uint32_t>> parse_range(std::string_view name) {
  size_t sep = name.find('_');
  if (sep == std::string_view::npos) {
    return Status::invalid_argument("'" + std::string(name) + "' is not a bundle (0x########_0x########)");
  }
  auto low = parse_hash(name.substr(0, sep));
  if (!low.is_ok()) return low.status();
  auto high = parse_hash(name.substr(sep + 1));
  if (!high.is_ok()) return high.status();
  if (*low >= *high) return Status::invalid_argument("bundle '" + std::string(name) + "' ends before it starts");
  return std::make_pair(*low, *high);
}

std::shared_ptr<const Boundaries> layout(const NamespaceName& ns) {
  static const auto* defaults = new std::shared_ptr<const Boundaries>(std::make_shared<const Boundaries>(
      default_boundaries()));
  LayoutView& v = view();
  if (!v.any.load(std::memory_order_acquire)) return *defaults;
  std::lock_guard lock(v.mu);
  if (auto it = v.split.find(ns.to_string()); it != v.split.end()) return it->second;
  return *defaults;
}

Boundaries layout_of(const NamespaceName& ns) { return *layout(ns); }

bool any_split() {
  return view().any.load(std::memory_order_acquire);
}

void set_layout(const std::string& ns, std::optional<Boundaries> boundaries) {
  LayoutView& v = view();
  std::lock_guard lock(v.mu);
  if (!boundaries || *boundaries == default_boundaries()) {
    v.split.erase(ns);
  } else {
    v.split[ns] = std::make_shared<const Boundaries>(std::move(*boundaries));
  }
  v.any.store(!v.split.empty(), std::memory_order_release);
}

std::string layout_key(const NamespaceName& ns) { return fmt::format("{}/{}/{}", kLayoutsRoot, ns.tenant, ns.local); }

Result<std::vector<uint32_t>> split_cuts(uint32_t low, uint32_t high, const std::vector<uint32_t>& positions,
                                         size_t current) {
  std::vector<uint32_t> cuts;
  if (positions.empty()) {
    if (high - low < 2) return Status::invalid_argument("bundle " + range_name(low, high) + " is too narrow to split");
    cuts.push_back(low + (high - low) / 2);
  } else {
    for (uint32_t p : positions) {
      if (p <= low || p >= high) {
        return Status::invalid_argument(fmt::format("split position 0x{:08x} is not inside bundle {}", p,
                                                    range_name(low, high)));
      }
      cuts.push_back(p);
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  }
  if (current + cuts.size() > kMaxBundlesPerNamespace) {
    return Status::failed_precondition("a namespace has at most " + std::to_string(kMaxBundlesPerNamespace) +
                                       " bundles; it has " + std::to_string(current));
  }
  return cuts;
}

Result<BundleName> parse_bundle(std::string_view bundle) {
  const size_t first = bundle.find('/');
  const size_t last = bundle.rfind('/');
  if (first == std::string_view::npos || first == last) {
    return Status::invalid_argument("'" + std::string(bundle) +
                                    "' is not a bundle (tenant/namespace/0x########_0x########)");
  }
  auto ns = NamespaceName::of(bundle.substr(0, first), bundle.substr(first + 1, last - first - 1));
  if (!ns.is_ok()) return ns.status();
  auto range = parse_range(bundle.substr(last + 1));
  if (!range.is_ok()) return range.status();
  return BundleName{*ns, range->first, range->second};
}

Result<SplitPlan> plan_split(const std::string& bundle, const std::vector<uint32_t>& positions) {
  auto name = parse_bundle(bundle);
  if (!name.is_ok()) return name.status();
  SplitPlan plan;
  plan.ns = name->ns;
  plan.low = name->low;
  plan.high = name->high;
  const Boundaries layout = layout_of(plan.ns);
  auto at = std::find(layout.begin(), layout.end(), plan.low);
  if (at == layout.end() || std::next(at) == layout.end() || *std::next(at) != plan.high) {
    return Status::not_found("namespace " + plan.ns.to_string() + " has no bundle " + range_name(plan.low, plan.high));
  }
  auto cuts = split_cuts(plan.low, plan.high, positions, layout.size() - 1);
  if (!cuts.is_ok()) return cuts.status();
  plan.cuts = std::move(*cuts);
  uint32_t from = plan.low;
  for (uint32_t cut : plan.cuts) {
    plan.pieces.push_back(plan.ns.to_string() + "/" + range_name(from, cut));
    from = cut;
  }
  plan.pieces.push_back(plan.ns.to_string() + "/" + range_name(from, plan.high));
  return plan;
}

void commit_split(metadata::Store& store, const NamespaceName& ns, uint32_t low, uint32_t high,
                  std::vector<uint32_t> cuts, std::function<void(Status)> done) {
  std::string key = layout_key(ns);
  store.get(key, [&store, ns, key, low, high, cuts = std::move(cuts), done = std::move(done)](
                     Result<metadata::Record> record) mutable {
    Boundaries b;
    int64_t expected = metadata::kMustNotExist;
    if (record.is_ok()) {
      auto decoded = decode_boundaries(record->value);
      if (!decoded.is_ok()) return done(Status::corruption("the bundle layout of " + ns.to_string() + ": " +
                                                           decoded.status().message()));
      b = std::move(*decoded);
      expected = record->stat.version;
    } else if (record.status().code() == common::ErrorCode::kNotFound) {
      b = default_boundaries();
    } else {
      return done(record.status());
    }
    auto at = std::find(b.begin(), b.end(), low);
    if (at == b.end() || std::next(at) == b.end() || *std::next(at) != high) {
      return done(Status::not_found("namespace " + ns.to_string() + " has no bundle " + range_name(low, high)));
    }
    if (b.size() - 1 + cuts.size() > kMaxBundlesPerNamespace) {
      return done(Status::failed_precondition("a namespace has at most " + std::to_string(kMaxBundlesPerNamespace) +
                                              " bundles"));
    }
    b.insert(std::next(at), cuts.begin(), cuts.end());
    std::string value = encode_boundaries(b);
    store.put(key, value, metadata::PutOptions{expected, 0},
              [ns, b = std::move(b), done = std::move(done)](Result<metadata::Stat> put) mutable {
                if (!put.is_ok()) {
                  if (put.status().code() == common::ErrorCode::kFailedPrecondition ||
                      put.status().code() == common::ErrorCode::kAlreadyExists) {
                    return done(Status::failed_precondition("the bundles of " + ns.to_string() +
                                                            " changed meanwhile; try again"));
                  }
                  return done(put.status());
                }
                set_layout(ns.to_string(), std::move(b));
                done(Status::ok());
              });
  });
}

BundleLayoutWatch::~BundleLayoutWatch() { stop(); }

Status BundleLayoutWatch::start() {
  metadata::Store* store = &store_;
  const std::string prefix = std::string(kLayoutsRoot) + "/";
  auto apply = [prefix](const std::string& key, Result<metadata::Record> record) {
    std::string ns = key.substr(prefix.size());
    if (!record.is_ok()) {
      if (record.status().code() == common::ErrorCode::kNotFound) set_layout(ns, std::nullopt);
      return;
    }
    auto b = decode_boundaries(record->value);
    if (!b.is_ok()) {
      MLOG_WARN("bundle layouts: the layout of {} cannot be read ({}); its bundles stay as they were", ns,
                b.status().to_string());
      return;
    }
    set_layout(ns, std::move(*b));
  };
  auto watched = store_.watch(prefix, [store, apply](const metadata::Event& event) {
    if (event.type == metadata::EventType::kDeleted) return apply(event.key, Status::not_found(event.key));
    store->get(event.key, [apply, key = event.key](Result<metadata::Record> record) { apply(key, std::move(record)); });
  });
  if (!watched.is_ok()) return watched.status();
  watch_ = *watched;
  auto tenants = metadata::blocking::list_children(store_, std::string(kLayoutsRoot));
  if (!tenants.is_ok()) {
    return tenants.status().code() == common::ErrorCode::kNotFound ? Status::ok() : tenants.status();
  }
  size_t split = 0;
  for (const auto& tenant : *tenants) {
    auto namespaces = metadata::blocking::list_children(store_, prefix + tenant);
    if (!namespaces.is_ok()) continue;
    for (const auto& ns : *namespaces) {
      std::string key = prefix + tenant + "/" + ns;
      apply(key, metadata::blocking::get(store_, key));
      split++;
    }
  }
  if (split != 0) MLOG_INFO("bundle layouts: {} namespaces have split bundles", split);
  return Status::ok();
}

void BundleLayoutWatch::stop() {
  if (watch_ == 0) return;
  store_.unwatch(watch_);
  watch_ = 0;
}

}  // namespace magnetar::broker
