#include "admin/handlers/topic_metrics.h"

namespace magnetar::admin {

using broker::BrokerService;
using common::MetricType;

namespace {

// Pulsar's names. The *_count families are untyped: the text format's lint
// reserves a _count suffix for histograms and summaries.
struct Family {
  const char* name;
  const char* help;
  MetricType type;
  double (*value)(const BrokerService::TopicSample&);
};

size_t consumers(const BrokerService::TopicSample& s) {
  size_t n = 0;
  for (const auto& sub : s.stats.subscriptions) n += sub.consumers;
  return n;
}

const Family kFamilies[] = {
    {"pulsar_rate_in", "Messages per second published to the topic", MetricType::kGauge,
     [](const BrokerService::TopicSample& s) { return s.stats.msg_rate_in; }},
    {"pulsar_rate_out", "Messages per second dispatched from the topic", MetricType::kGauge,
     [](const BrokerService::TopicSample& s) { return s.stats.msg_rate_out; }},
    {"pulsar_throughput_in", "Bytes per second published to the topic", MetricType::kGauge,
     [](const BrokerService::TopicSample& s) { return s.stats.byte_rate_in; }},
    {"pulsar_throughput_out", "Bytes per second dispatched from the topic", MetricType::kGauge,
     [](const BrokerService::TopicSample& s) { return s.stats.byte_rate_out; }},
    {"pulsar_in_messages_total", "Messages published to the topic since it was loaded", MetricType::kCounter,
     [](const BrokerService::TopicSample& s) { return static_cast<double>(s.stats.messages_in); }},
    {"pulsar_out_messages_total", "Messages dispatched from the topic since it was loaded", MetricType::kCounter,
     [](const BrokerService::TopicSample& s) { return static_cast<double>(s.stats.messages_out); }},
    {"pulsar_publish_rate_limit_times", "Times a publish to the topic held its connection over a publish rate limit",
     MetricType::kGauge,
     [](const BrokerService::TopicSample& s) { return static_cast<double>(s.stats.publish_rate_limited_times); }},
    {"pulsar_msg_backlog", "Messages not yet acknowledged, summed over the topic's subscriptions",
     MetricType::kGauge, [](const BrokerService::TopicSample& s) { return static_cast<double>(s.backlog_messages); }},
    {"pulsar_storage_size", "Bytes of entries the topic's log holds", MetricType::kGauge,
     [](const BrokerService::TopicSample& s) { return static_cast<double>(s.stats.storage_size); }},
    {"magnetar_topic_damaged_entries",
     "Entries of the topic found damaged on disk since it was loaded, skipped for every reader",
     MetricType::kGauge,
     [](const BrokerService::TopicSample& s) { return static_cast<double>(s.stats.damaged_entries); }},
    {"pulsar_producers_count", "Producers connected to the topic", MetricType::kUntyped,
     [](const BrokerService::TopicSample& s) { return static_cast<double>(s.stats.publishers.size()); }},
    {"pulsar_subscriptions_count", "Subscriptions of the topic", MetricType::kUntyped,
     [](const BrokerService::TopicSample& s) { return static_cast<double>(s.stats.subscriptions.size()); }},
    {"pulsar_consumers_count", "Consumers connected to the topic", MetricType::kUntyped,
     [](const BrokerService::TopicSample& s) { return static_cast<double>(consumers(s)); }},
};

// Per topic and remote cluster (label remote_cluster), Pulsar's names.
struct ReplicationFamily {
  const char* name;
  const char* help;
  MetricType type;
  double (*value)(const broker::ReplicatorStats&);
};

const ReplicationFamily kReplicationFamilies[] = {
    {"pulsar_replication_rate_out", "Messages per second replicated to the remote cluster", MetricType::kGauge,
     [](const broker::ReplicatorStats& r) { return r.msg_rate_out; }},
    {"pulsar_replication_throughput_out", "Bytes per second replicated to the remote cluster", MetricType::kGauge,
     [](const broker::ReplicatorStats& r) { return r.byte_rate_out; }},
    {"pulsar_replication_backlog", "Messages not yet replicated to the remote cluster", MetricType::kGauge,
     [](const broker::ReplicatorStats& r) { return static_cast<double>(r.backlog_messages); }},
    {"pulsar_replication_delay_in_seconds", "Age of the oldest message not yet replicated to the remote cluster",
     MetricType::kGauge, [](const broker::ReplicatorStats& r) { return r.delay_seconds; }},
    {"pulsar_replication_connected_count", "1 while the replicator's producer on the remote cluster is connected",
     MetricType::kUntyped, [](const broker::ReplicatorStats& r) { return r.connected ? 1.0 : 0.0; }},
    {"magnetar_replication_out_messages_total", "Messages replicated to the remote cluster since the topic loaded",
     MetricType::kCounter, [](const broker::ReplicatorStats& r) { return static_cast<double>(r.messages_out); }},
};

}  // namespace

TopicMetrics::TopicMetrics(common::MetricsRegistry& registry, BrokerService& broker, std::string cluster)
    : registry_(registry), broker_(broker), cluster_(std::move(cluster)) {
  for (const Family& f : kFamilies) {
    auto value = f.value;
    collector_ids_.push_back(registry_.add_collector(
        f.name, f.help, f.type, [snapshot = snapshot_, cluster = cluster_, name = std::string(f.name), value](
                                    common::SampleWriter& out) {
          std::lock_guard<std::mutex> lock(snapshot->mu);
          for (const auto& s : snapshot->samples) {
            out.sample(name,
                       {{"cluster", cluster}, {"namespace", s.name.ns.to_string()}, {"topic", s.name.to_string()}},
                       value(s));
          }
        }));
  }
  for (const ReplicationFamily& f : kReplicationFamilies) {
    auto value = f.value;
    collector_ids_.push_back(registry_.add_collector(
        f.name, f.help, f.type, [snapshot = snapshot_, cluster = cluster_, name = std::string(f.name), value](
                                    common::SampleWriter& out) {
          std::lock_guard<std::mutex> lock(snapshot->mu);
          for (const auto& s : snapshot->samples) {
            for (const auto& r : s.stats.replication) {
              out.sample(name,
                         {{"cluster", cluster}, {"namespace", s.name.ns.to_string()}, {"topic", s.name.to_string()},
                          {"remote_cluster", r.cluster}},
                         value(r));
            }
          }
        }));
  }
}

TopicMetrics::~TopicMetrics() {
  for (uint64_t id : collector_ids_) registry_.remove_collector(id);
}

void TopicMetrics::refresh(std::function<void()> then) {
  broker_.collect_stats([snapshot = snapshot_, then = std::move(then)](std::vector<BrokerService::TopicSample> all) {
    {
      std::lock_guard<std::mutex> lock(snapshot->mu);
      snapshot->samples = std::move(all);
    }
    then();
  });
}

}  // namespace magnetar::admin
