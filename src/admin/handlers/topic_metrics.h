// Per-topic metrics with Pulsar's names (pulsar_rate_in, pulsar_msg_backlog,
// ...), labelled cluster / namespace / topic.
//
// A topic lives on its home reactor, so the registry's collectors (which run
// under the registry lock) never touch it: refresh() gathers every loaded
// topic's stats from the reactors first (BrokerService::collect_stats, no
// thread blocks) and keeps them as a snapshot that the collectors read.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "broker/broker_service.h"
#include "common/metrics.h"

namespace magnetar::admin {

class TopicMetrics {
 public:
  // Registers the collectors; the destructor removes them. `broker` must
  // outlive this object.
  TopicMetrics(common::MetricsRegistry& registry, broker::BrokerService& broker, std::string cluster);
  ~TopicMetrics();
  TopicMetrics(const TopicMetrics&) = delete;
  TopicMetrics& operator=(const TopicMetrics&) = delete;

  // Any thread: takes a new snapshot, then calls `then` (on a reactor).
  void refresh(std::function<void()> then);

 private:
  struct Snapshot {
    std::mutex mu;
    std::vector<broker::BrokerService::TopicSample> samples;
  };

  common::MetricsRegistry& registry_;
  broker::BrokerService& broker_;
  const std::string cluster_;
  std::shared_ptr<Snapshot> snapshot_ = std::make_shared<Snapshot>();
  std::vector<uint64_t> collector_ids_;
};

}  // namespace magnetar::admin
