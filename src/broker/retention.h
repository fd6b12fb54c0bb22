// Which retention a topic has, and where it came from.
//
// One model for every protocol: a topic's own retention policy wins, then
// its namespace's (when set explicitly), then the node's default for the
// protocol that made the topic. A topic made through Kafka (CreateTopics,
// or auto-created by a Kafka client) keeps data for retention.ms (7 days
// unless --kafka-default-retention-ms says otherwise), whatever consumers
// do, as Kafka does; one made any other way keeps Pulsar's default: a
// ledger goes once every subscription has acknowledged it. In both, a
// durable subscription's unacknowledged backlog is never deleted by
// retention (backlog quotas bound it).
//
// Trace topics keep their namespace's tracing retention.
#pragma once

#include <cstdint>
#include <string_view>

#include "broker/naming.h"
#include "broker/policies.h"

namespace magnetar::broker {

// Which protocol made a topic: recorded with its log when it is created
// (ManagedLedgerConfig::origin) and kept for its life.
enum class TopicOrigin : uint8_t { kPulsar = 0, kKafka = 1 };
TopicOrigin origin_from_byte(uint8_t b);

// The node's defaults, by the protocol that made the topic. -1: no limit.
struct RetentionDefaults {
  int64_t kafka_time_ms = 7LL * 24 * 3600 * 1000;
  int64_t kafka_size_bytes = -1;
  bool kafka_configured = false;  // set on the command line or in the config file
};

enum class RetentionSource { kTopic, kNamespace, kKafkaDefault, kPulsarDefault, kTracing };
std::string_view retention_source_name(RetentionSource s);  // "topic", "namespace", "kafka-default", ...

struct RetentionInEffect {
  int64_t time_ms = 0;     // -1: forever; 0: none past consumption
  int64_t size_bytes = 0;  // -1: no limit
  RetentionSource source = RetentionSource::kPulsarDefault;
};

// `effective` is what PolicyCache::effective answers for `topic`;
// `from_topic` whether its retention is the topic's own (or its
// partitioned topic's) override rather than the namespace's.
RetentionInEffect retention_in_effect(const TopicName& topic, const NamespacePolicies& effective, bool from_topic,
                                      TopicOrigin origin, const RetentionDefaults& defaults);

}  // namespace magnetar::broker
