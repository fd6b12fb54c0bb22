// LoadManager: a cluster member's part in spreading load over the brokers
// (Pulsar's load manager is the model).
//
// Every broker reports its load every report interval to
// "/loadbalance/brokers/<node>" (JSON): message and byte rates in and out,
// loaded topics, the process's CPU (a fraction of one core) and resident
// memory, and per bundle its message and byte rates, topics and sessions.
//
// The live broker with the lowest id sheds load every shed interval, moving
// at most one bundle a round (BundleOwnership::unload: its topics close on
// the owner and clients look them up again), never a bundle it moved within
// the cool-down:
// - "msg-rate": the busiest broker is above the average by more than the
//   threshold (and above a floor worth moving for) two rounds running: its
//   bundle whose rate is
//   nearest half the gap to the least busy allowed broker goes there, if
//   that narrows the gap;
// - "byte-rate": otherwise the same by bytes a second in and out (large
//   messages load the network and the disk more than their count says);
// - "bundle-count": otherwise, a broker owning at least two bundles more
//   than another gives it its least busy bundle; so a member that joins
//   takes its share within a few rounds.
// Namespace isolation policies bound every destination. Before it moves
// anything, a round splits the bundle furthest over a split limit (topics,
// sessions, msg/s, bytes/s, as in Pulsar's broker.conf) in halves, one a
// round; its owner keeps both halves, which later rounds can move apart.
// Each decision is logged, counted in magnetar_load_shed_total{reason}, and
// the last ones are kept at "/loadbalance/decisions" for every member to
// show.
//
// Threads: the timers and callbacks run on the cluster reactor; view() from
// any thread (blocking).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <functional>
#include <vector>
#include <string>

#include <nlohmann/json.hpp>

#include "broker/broker_service.h"
#include "broker/bundle_ownership.h"
#include "common/result.h"
#include "metadata/store.h"
#include "runtime/component.h"

namespace magnetar::runtime {
class Reactor;
class Timer;
}

namespace magnetar::server {

// One round's choice, apart from where its inputs come from.
struct BrokerLoad {
  double rate = 0;                   // msg/s in + out
  std::vector<std::string> bundles;  // "tenant/namespace/range"
  double bytes = 0;                  // bytes/s in + out
};
struct ShedInput {
  std::map<uint64_t, BrokerLoad> brokers;  // the live brokers
  std::map<std::string, double> bundle_rate;
  std::map<std::string, double> bundle_bytes;
  uint64_t hot_last_round = 0;        // the broker over the rate threshold at the last round
  uint64_t hot_bytes_last_round = 0;  // the broker over the byte-rate threshold at the last round
  double rate_threshold = 0.25;       // for both rates
  double min_rate = 100;
  double min_bytes = 1024 * 1024;  // bytes/s below which a broker is not shed for its byte rate
};
struct ShedMove {
  std::string bundle;
  uint64_t from = 0;
  uint64_t to = 0;
  std::string reason;  // "msg-rate", "bundle-count"
  std::string detail;
};
struct ShedChoice {
  std::optional<ShedMove> move;
  uint64_t hot = 0;        // the broker over the rate threshold this round
  uint64_t hot_bytes = 0;  // the broker over the byte-rate threshold this round
};
// `movable`: not cooling down; `allowed`: the bundle may go to that broker.
ShedChoice choose_move(const ShedInput& in, const std::function<bool(const std::string&)>& movable,
                       const std::function<bool(const std::string&, uint64_t)>& allowed);

// A bundle's load as its owner reported it.
struct BundleLoad {
  double msg_rate = 0;    // msg/s in + out
  double bytes_rate = 0;  // bytes/s in + out
  int64_t topics = 0;
  int64_t sessions = 0;  // producers and consumers
};
// When a bundle is split (Pulsar's loadBalancerNamespaceBundleMax* in
// broker.conf, same defaults); 0: no limit of that kind.
struct SplitLimits {
  int64_t topics = 1000;
  int64_t sessions = 1000;
  double msg_rate = 30000;
  double bytes_rate = 100.0 * 1024 * 1024;
};
struct SplitChoice {
  std::string bundle;  // "tenant/namespace/range"
  std::string reason;  // "split-topics", "split-sessions", "split-msg-rate", "split-bandwidth"
  std::string detail;
};
// The bundle furthest over a limit (by the ratio of its load to the limit),
// among those with two topics or more (one topic cannot be spread) that
// `splittable` allows.
std::optional<SplitChoice> choose_split(const std::map<std::string, BundleLoad>& bundles, const SplitLimits& limits,
                                        const std::function<bool(const std::string&)>& splittable);

class LoadManager final : public runtime::Component {
 public:
  struct Options {
    std::chrono::milliseconds report_interval{5000};
    std::chrono::milliseconds shed_interval{10000};  // 0: this member never sheds
    std::chrono::milliseconds cool_down{120000};
    double rate_threshold = 0.25;  // above the average by this fraction
    double min_rate = 100;         // msg/s (in + out) below which a broker is not shed for its rate
    bool auto_split = true;        // split bundles over `split` (Pulsar's loadBalancerAutoBundleSplitEnabled)
    SplitLimits split;
  };

  LoadManager(metadata::Store& store, broker::BrokerService& broker, broker::BundleOwnership& ownership,
              runtime::Reactor& reactor, uint64_t self, std::function<bool()> lease, Options options);
  ~LoadManager() override;

  std::string_view name() const override { return "load-manager"; }
  common::Status start() override;
  void stop() override;

  // Blocking, any thread but the cluster reactor: every broker's last
  // report and the last decisions, as GET /admin/v2/cluster/load answers.
  common::Result<nlohmann::json> view();

 private:
  using Json = nlohmann::json;
  void report();
  void shed();
  // Chooses at most one move from the brokers' reports.
  void decide(const std::map<uint64_t, Json>& reports);
  void record(const std::string& bundle, uint64_t from, uint64_t to, const std::string& reason,
              const std::string& detail);
  // Keeps `decision` as the latest, or replaces the one it updates.
  void keep(const Json& decision, bool update);

  metadata::Store& store_;
  broker::BrokerService& broker_;
  broker::BundleOwnership& ownership_;
  runtime::Reactor& reactor_;
  const uint64_t self_;
  std::function<bool()> lease_;
  const Options options_;
  std::unique_ptr<runtime::Timer> report_timer_;  // on reactor_
  std::unique_ptr<runtime::Timer> shed_timer_;
  // On reactor_: the CPU time at the last report, and when.
  double last_cpu_seconds_ = -1;
  int64_t last_cpu_at_ms_ = 0;
  bool shedding_ = false;  // a round is under way
  uint64_t hot_broker_ = 0;        // over the rate threshold at the last round
  uint64_t hot_bytes_broker_ = 0;  // over the byte-rate threshold at the last round
  std::map<std::string, int64_t> moved_at_ms_;  // bundle -> when this member moved it (cool-down)
  std::deque<Json> decisions_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace magnetar::server
