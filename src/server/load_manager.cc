#include "server/load_manager.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "broker/bundle_layout.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "metadata/blocking.h"
#include "runtime/reactor.h"
#include "runtime/timer.h"

namespace magnetar::server {

using common::Result;
using common::Status;

namespace {

constexpr std::string_view kReports = "/loadbalance/brokers";
constexpr std::string_view kDecisions = "/loadbalance/decisions";
constexpr size_t kDecisionsKept = 20;

// CPU seconds this process used, user and system (0 when /proc says nothing).
double process_cpu_seconds() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  // The command name may hold spaces: the fields after it start past ')'.
  auto paren = line.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream rest(line.substr(paren + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::strtod(field.c_str(), nullptr);
    if (i == 15) stime = std::strtod(field.c_str(), nullptr);
  }
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

int64_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  return resident * ::sysconf(_SC_PAGESIZE);
}

double rate_of(const nlohmann::json& report) {
  return report.value("msgRateIn", 0.0) + report.value("msgRateOut", 0.0);
}

}  // namespace

LoadManager::LoadManager(metadata::Store& store, broker::BrokerService& broker, broker::BundleOwnership& ownership,
                         runtime::Reactor& reactor, uint64_t self, std::function<bool()> lease, Options options)
    : store_(store),
      broker_(broker),
      ownership_(ownership),
      reactor_(reactor),
      self_(self),
      lease_(std::move(lease)),
      options_(options) {}

LoadManager::~LoadManager() = default;

Status LoadManager::start() {
  reactor_.run_sync([this]() {
    report();  // the first report at once: a member that joins is seen from its start
    report_timer_ = std::make_unique<runtime::Timer>(reactor_);
    report_timer_->every(options_.report_interval, [this]() { report(); });
    if (options_.shed_interval.count() > 0) {
      shed_timer_ = std::make_unique<runtime::Timer>(reactor_);
      shed_timer_->every(options_.shed_interval, [this]() { shed(); });
    }
  });
  return Status::ok();
}

void LoadManager::stop() {
  reactor_.run_sync([this]() {
    *alive_ = false;
    report_timer_.reset();
    shed_timer_.reset();
  });
}

void LoadManager::report() {
  std::weak_ptr<bool> alive = alive_;
  broker_.collect_stats([this, alive](std::vector<broker::BrokerService::TopicSample> samples) {
    std::map<std::string, BundleLoad> per_bundle;
    double in = 0, out = 0, bytes_in = 0, bytes_out = 0;
    auto finite = [](double v) { return std::isfinite(v) ? v : 0.0; };
    for (const auto& s : samples) {
      BundleLoad& b = per_bundle[broker::qualified_bundle(s.name)];
      b.msg_rate += finite(s.stats.msg_rate_in) + finite(s.stats.msg_rate_out);
      b.bytes_rate += finite(s.stats.byte_rate_in) + finite(s.stats.byte_rate_out);
      b.topics++;
      b.sessions += static_cast<int64_t>(s.stats.publishers.size());
      for (const auto& sub : s.stats.subscriptions) b.sessions += static_cast<int64_t>(sub.consumers);
      in += finite(s.stats.msg_rate_in);
      out += finite(s.stats.msg_rate_out);
      bytes_in += finite(s.stats.byte_rate_in);
      bytes_out += finite(s.stats.byte_rate_out);
    }
    Json bundles = Json::object();
    for (const auto& [bundle, load] : per_bundle) {
      Json entry = Json::object();
      entry["msgRate"] = load.msg_rate;
      entry["bytesRate"] = load.bytes_rate;
      entry["topics"] = load.topics;
      entry["sessions"] = load.sessions;
      bundles[bundle] = std::move(entry);
    }
    Json report{{"node", self_},
                {"msgRateIn", in},
                {"msgRateOut", out},
                {"bytesInPerSec", bytes_in},
                {"bytesOutPerSec", bytes_out},
                {"topics", samples.size()},
                {"memoryBytes", resident_bytes()},
                {"bundles", bundles},
                {"at", common::wall_clock_ms()}};
    if (!reactor_.post_reliably([this, alive, report = std::move(report)]() mutable {
      if (alive.expired() || !*alive.lock()) return;
      const int64_t now = common::monotonic_ms();
      const double cpu = process_cpu_seconds();
      report["cpu"] = last_cpu_seconds_ < 0 || now <= last_cpu_at_ms_
                          ? 0.0
                          : (cpu - last_cpu_seconds_) / (static_cast<double>(now - last_cpu_at_ms_) / 1000.0);
      last_cpu_seconds_ = cpu;
      last_cpu_at_ms_ = now;
      store_.put(std::string(kReports) + "/" + std::to_string(self_), report.dump(), {},
                 [](Result<metadata::Stat> put) {
                   if (!put.is_ok()) MLOG_DEBUG("load report not written: {}", put.status().to_string());
                 });
    })) MLOG_DEBUG("load manager: the cluster reactor is stopping");
  });
}

void LoadManager::shed() {
  if (shedding_ || (lease_ && !lease_())) return;
  // The live broker with the lowest id decides; the others only report.
  for (const auto& node : ownership_.live_nodes()) {
    if (node.node < self_) return;
  }
  shedding_ = true;
  std::weak_ptr<bool> alive = alive_;
  store_.list_children(std::string(kReports), [this, alive](Result<std::vector<std::string>> names) {
    struct Gather {
      std::mutex mu;
      size_t left = 0;
      std::map<uint64_t, Json> reports;
    };
    auto g = std::make_shared<Gather>();
    auto finish = [this, alive, g]() {
      if (!reactor_.post_reliably([this, alive, g]() {
        if (alive.expired() || !*alive.lock()) return;
        shedding_ = false;
        try {
          decide(g->reports);
        } catch (const nlohmann::json::exception& e) {
          // A report of another version, or damaged: skip the round rather than stop the member.
          MLOG_WARN("load balancing: a load report could not be read: {}", e.what());
        }
      })) MLOG_DEBUG("load manager: the cluster reactor is stopping");
    };
    if (!names.is_ok() || names->empty()) return finish();
    g->left = names->size();
    for (const auto& name : *names) {
      store_.get(std::string(kReports) + "/" + name, [g, finish](Result<metadata::Record> record) {
        bool last = false;
        {
          std::lock_guard lock(g->mu);
          if (record.is_ok()) {
            auto j = Json::parse(record->value, nullptr, false);
            if (j.is_object() && j.contains("node") && j["node"].is_number_unsigned()) {
              const auto node = j["node"].get<uint64_t>();
              g->reports[node] = std::move(j);
            }
          }
          last = --g->left == 0;
        }
        if (last) finish();
      });
    }
  });
}

namespace {

// The msg-rate (or byte-rate) rule of choose_move: the busiest broker by
// `rate_of_broker`, over the threshold, gives the bundle nearest half the
// gap. Sets `hot` to the broker over the threshold this round.
std::optional<ShedMove> shed_by_rate(const ShedInput& in, const std::function<double(const BrokerLoad&)>& rate_of_broker,
                                     const std::map<std::string, double>& bundle_rate, double min_rate,
                                     uint64_t hot_last_round, const char* reason, const char* unit,
                                     const std::function<bool(const std::string&)>& movable,
                                     const std::function<bool(const std::string&, uint64_t)>& allowed, uint64_t& hot) {
  const auto& brokers = in.brokers;
  auto rate_of_bundle = [&bundle_rate](const std::string& bundle) {
    auto it = bundle_rate.find(bundle);
    return it == bundle_rate.end() ? 0.0 : it->second;
  };
  double total = 0;
  for (const auto& [id, b] : brokers) total += rate_of_broker(b);
  const double average = total / static_cast<double>(brokers.size());
  auto busiest = std::max_element(brokers.begin(), brokers.end(), [&](const auto& a, const auto& b) {
    return rate_of_broker(a.second) < rate_of_broker(b.second);
  });
  const double busiest_rate = rate_of_broker(busiest->second);
  const bool over = busiest_rate > min_rate && busiest_rate > average * (1 + in.rate_threshold);
  // A rate is noisy: the same broker must be over two rounds running.
  hot = over ? busiest->first : 0;
  if (!over || hot_last_round != busiest->first) return std::nullopt;
  std::string best;
  uint64_t best_to = 0;
  double best_miss = 0;
  for (const auto& bundle : busiest->second.bundles) {
    const double r = rate_of_bundle(bundle);
    if (!movable(bundle) || r <= 0) continue;
    // The least busy broker this bundle may go to.
    uint64_t to = 0;
    double to_rate = 0;
    for (const auto& [id, b] : brokers) {
      if (id == busiest->first || !allowed(bundle, id)) continue;
      if (to == 0 || rate_of_broker(b) < to_rate) {
        to = id;
        to_rate = rate_of_broker(b);
      }
    }
    const double gap = busiest_rate - to_rate;
    if (to == 0 || r >= gap) continue;  // moving it would not narrow the gap
    const double miss = std::fabs(r - gap / 2);
    if (best.empty() || miss < best_miss) {
      best = bundle;
      best_to = to;
      best_miss = miss;
    }
  }
  if (best.empty()) return std::nullopt;
  char detail[160];
  std::snprintf(detail, sizeof(detail), "node %llu at %.0f %s, average %.0f; the bundle carries %.0f",
                static_cast<unsigned long long>(busiest->first), busiest_rate, unit, average, rate_of_bundle(best));
  return ShedMove{best, busiest->first, best_to, reason, detail};
}

}  // namespace

ShedChoice choose_move(const ShedInput& in, const std::function<bool(const std::string&)>& movable,
                       const std::function<bool(const std::string&, uint64_t)>& allowed) {
  ShedChoice choice;
  const auto& brokers = in.brokers;
  if (brokers.size() < 2) return choice;
  auto rate_of_bundle = [&in](const std::string& bundle) {
    auto it = in.bundle_rate.find(bundle);
    return it == in.bundle_rate.end() ? 0.0 : it->second;
  };
  choice.move = shed_by_rate(in, [](const BrokerLoad& b) { return b.rate; }, in.bundle_rate, in.min_rate,
                             in.hot_last_round, "msg-rate", "msg/s", movable, allowed, choice.hot);
  if (choice.move) return choice;
  choice.move = shed_by_rate(in, [](const BrokerLoad& b) { return b.bytes; }, in.bundle_bytes, in.min_bytes,
                             in.hot_bytes_last_round, "byte-rate", "bytes/s", movable, allowed, choice.hot_bytes);
  if (choice.move) return choice;
  // By bundle count.
  auto most = std::max_element(brokers.begin(), brokers.end(), [](const auto& a, const auto& b) {
    return a.second.bundles.size() < b.second.bundles.size();
  });
  std::vector<std::string> candidates = most->second.bundles;
  std::stable_sort(candidates.begin(), candidates.end(), [&](const std::string& a, const std::string& b) {
    return rate_of_bundle(a) < rate_of_bundle(b);
  });
  const size_t most_count = most->second.bundles.size();
  for (const auto& bundle : candidates) {
    if (!movable(bundle)) continue;
    uint64_t to = 0;
    size_t to_count = 0;
    for (const auto& [id, b] : brokers) {
      if (id != most->first && b.bundles.size() + 2 <= most_count && allowed(bundle, id) &&
          (to == 0 || b.bundles.size() < to_count)) {
        to = id;
        to_count = b.bundles.size();
      }
    }
    if (to == 0) continue;
    std::string detail = "node " + std::to_string(most->first) + " owns " + std::to_string(most_count) +
                         " bundles, node " + std::to_string(to) + " " + std::to_string(to_count);
    choice.move = ShedMove{bundle, most->first, to, "bundle-count", detail};
    return choice;
  }
  return choice;
}

std::optional<SplitChoice> choose_split(const std::map<std::string, BundleLoad>& bundles, const SplitLimits& limits,
                                        const std::function<bool(const std::string&)>& splittable) {
  std::optional<SplitChoice> best;
  double best_ratio = 1;
  for (const auto& [bundle, load] : bundles) {
    if (load.topics < 2) continue;
    auto consider = [&](double value, double limit, const char* reason, const char* unit) {
      if (limit <= 0 || value <= limit) return;
      const double ratio = value / limit;
      // Asked last: only of a bundle that would be chosen.
      if ((best && ratio <= best_ratio) || !splittable(bundle)) return;
      char detail[160];
      std::snprintf(detail, sizeof(detail), "%.0f %s, over the limit of %.0f (%lld topics)", value, unit, limit,
                    static_cast<long long>(load.topics));
      best = SplitChoice{bundle, reason, detail};
      best_ratio = ratio;
    };
    consider(static_cast<double>(load.topics), static_cast<double>(limits.topics), "split-topics", "topics");
    consider(static_cast<double>(load.sessions), static_cast<double>(limits.sessions), "split-sessions", "sessions");
    consider(load.msg_rate, limits.msg_rate, "split-msg-rate", "msg/s");
    consider(load.bytes_rate, limits.bytes_rate, "split-bandwidth", "bytes/s");
  }
  return best;
}

void LoadManager::decide(const std::map<uint64_t, Json>& reports) {
  const int64_t now_ms = common::monotonic_ms();
  const int64_t wall = common::wall_clock_ms();
  for (auto it = moved_at_ms_.begin(); it != moved_at_ms_.end();) {
    it = now_ms - it->second >= options_.cool_down.count() ? moved_at_ms_.erase(it) : std::next(it);
  }
  ShedInput in;
  std::map<std::string, BundleLoad> bundle_load;
  in.hot_last_round = hot_broker_;
  in.hot_bytes_last_round = hot_bytes_broker_;
  in.rate_threshold = options_.rate_threshold;
  in.min_rate = options_.min_rate;
  for (const auto& node : ownership_.live_nodes()) {
    BrokerLoad& b = in.brokers[node.node];
    b.bundles = ownership_.bundles_of(node.node);
    auto r = reports.find(node.node);
    // A report older than three rounds says nothing about now.
    if (r == reports.end() || wall - r->second.value("at", int64_t{0}) > 3 * options_.report_interval.count()) continue;
    b.rate = rate_of(r->second);
    b.bytes = r->second.value("bytesInPerSec", 0.0) + r->second.value("bytesOutPerSec", 0.0);
    const Json bundles = r->second.value("bundles", Json::object());
    if (!bundles.is_object()) continue;
    for (const auto& [bundle, load] : bundles.items()) {
      if (!load.is_object()) continue;
      in.bundle_rate[bundle] = load.value("msgRate", 0.0);
      in.bundle_bytes[bundle] = load.value("bytesRate", 0.0);
      // Only what the bundle's owner says about it, and only a bundle its layout still has.
      const auto& owned = b.bundles;
      if (std::find(owned.begin(), owned.end(), bundle) == owned.end()) continue;
      bundle_load[bundle] = BundleLoad{load.value("msgRate", 0.0), load.value("bytesRate", 0.0),
                                       load.value("topics", int64_t{0}), load.value("sessions", int64_t{0})};
    }
  }
  if (options_.auto_split) {
    auto split = choose_split(bundle_load, options_.split, [this](const std::string& bundle) {
      if (moved_at_ms_.count(bundle) != 0) return false;
      auto plan = broker::plan_split(bundle, {});
      return plan.is_ok();
    });
    if (split) {
      uint64_t owner = 0;
      for (const auto& [id, b] : in.brokers) {
        if (std::find(b.bundles.begin(), b.bundles.end(), split->bundle) != b.bundles.end()) owner = id;
      }
      return record(split->bundle, owner, owner, split->reason, split->detail);
    }
  }
  ShedChoice choice = choose_move(
      in, [this](const std::string& bundle) { return moved_at_ms_.count(bundle) == 0; },
      [this](const std::string& bundle, uint64_t to) {
        auto ok = ownership_.allowed_brokers(bundle);
        return std::find(ok.begin(), ok.end(), to) != ok.end();
      });
  hot_broker_ = choice.hot;
  hot_bytes_broker_ = choice.hot_bytes;
  if (choice.move) record(choice.move->bundle, choice.move->from, choice.move->to, choice.move->reason,
                          choice.move->detail);
}

void LoadManager::record(const std::string& bundle, uint64_t from, uint64_t to, const std::string& reason,
                         const std::string& detail) {
  moved_at_ms_[bundle] = common::monotonic_ms();
  const bool split = reason.rfind("split", 0) == 0;
  if (split) {
    MLOG_INFO("load balancing: splitting bundle {} on node {} ({}: {})", bundle, from, reason, detail);
  } else {
    MLOG_INFO("load balancing: moving bundle {} from node {} to node {} ({}: {})", bundle, from, to, reason, detail);
  }
  common::MetricsRegistry::global()
      .counter("magnetar_load_shed_total", "Bundles the load manager moved or split, by why", {{"reason", reason}})
      .inc();
  Json decision{{"at", common::wall_clock_ms()}, {"bundle", bundle}, {"from", from}, {"to", to},
                {"reason", reason}, {"detail", detail}};
  keep(decision, false);
  std::weak_ptr<bool> alive = alive_;
  auto finished = [this, alive, decision, split](Status st) mutable {
    if (!st.is_ok()) {
      MLOG_WARN("load balancing: bundle {} not {}: {}", decision.value("bundle", ""), split ? "split" : "moved",
                st.to_string());
    }
    if (!reactor_.post_reliably([this, alive, decision, ok = st.is_ok(), why = st.to_string()]() mutable {
      if (alive.expired() || !*alive.lock()) return;
      decision["done"] = ok;
      if (!ok) decision["error"] = why;
      keep(decision, true);
    })) MLOG_DEBUG("load manager: the cluster reactor is stopping");
  };
  if (split) return ownership_.split(bundle, {}, false, std::move(finished));
  ownership_.unload(bundle, to, std::move(finished));
}

void LoadManager::keep(const Json& decision, bool update) {
  if (!update) {
    decisions_.push_front(decision);
    while (decisions_.size() > kDecisionsKept) decisions_.pop_back();
    return;
  }
  for (auto& d : decisions_) {
    const bool same = d.value("at", int64_t{0}) == decision.value("at", int64_t{0}) && d["bundle"] == decision["bundle"];
    if (same) d = decision;
  }
  store_.put(std::string(kDecisions), Json(decisions_).dump(), {}, [](Result<metadata::Stat>) {});
}

Result<nlohmann::json> LoadManager::view() {
  Json brokers = Json::array();
  auto names = metadata::blocking::list_children(store_, std::string(kReports));
  if (names.is_ok()) {
    for (const auto& name : *names) {
      auto record = metadata::blocking::get(store_, std::string(kReports) + "/" + name);
      if (!record.is_ok()) continue;
      auto j = Json::parse(record->value, nullptr, false);
      if (j.is_object()) brokers.push_back(std::move(j));
    }
  } else if (names.status().code() != common::ErrorCode::kNotFound) {
    return names.status();
  }
  Json decisions = Json::array();
  auto stored = metadata::blocking::get(store_, std::string(kDecisions));
  if (stored.is_ok()) {
    auto j = Json::parse(stored->value, nullptr, false);
    if (j.is_array()) decisions = std::move(j);
  }
  return Json{{"brokers", brokers}, {"decisions", decisions}};
}

}  // namespace magnetar::server
