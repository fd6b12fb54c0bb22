// Topic stats as Pulsar's JSON documents (TopicStats, PersistentTopicInternalStats).
#pragma once

#include "admin/handlers/policy_json.h"
#include "broker/topic.h"

namespace magnetar::admin {

// "ledger:entry", as Pulsar writes a position.
std::string position_string(ledger::Position p);
// "2026-11-30T12:00:00.000Z" (UTC) from ms since the epoch, as Pulsar writes times.
std::string iso_time(int64_t ms);
// Pulsar's TopicStats from stats with rates (Topic::stats_at).
Json topic_stats_json(const broker::TopicStats& stats);
// Pulsar's PartitionedTopicStats: the partitions' stats summed, subscriptions
// merged by name; `partitions` maps each partition's name to its stats.
Json partitioned_stats_json(const std::map<std::string, Json>& partitions, bool per_partition);
// Pulsar's PersistentTopicInternalStats for a loaded topic. Home reactor only.
Json internal_stats_json(broker::Topic& topic);

}  // namespace magnetar::admin
