#include "broker/retention.h"

#include "broker/tracing.h"

namespace magnetar::broker {

namespace {

int64_t minutes_to_ms(int64_t minutes) { return minutes < 0 ? -1 : minutes * 60'000; }
int64_t mb_to_bytes(int64_t mb) { return mb < 0 ? -1 : mb * (int64_t{1} << 20); }

}  // namespace

TopicOrigin origin_from_byte(uint8_t b) {
  return b == static_cast<uint8_t>(TopicOrigin::kKafka) ? TopicOrigin::kKafka : TopicOrigin::kPulsar;
}

std::string_view retention_source_name(RetentionSource s) {
  switch (s) {
    case RetentionSource::kTopic: return "topic";
    case RetentionSource::kNamespace: return "namespace";
    case RetentionSource::kKafkaDefault: return "kafka-default";
    case RetentionSource::kPulsarDefault: return "pulsar-default";
    case RetentionSource::kTracing: return "tracing";
  }
  return "pulsar-default";
}

RetentionInEffect retention_in_effect(const TopicName& topic, const NamespacePolicies& effective, bool from_topic,
                                      TopicOrigin origin, const RetentionDefaults& defaults) {
  if (is_trace_topic(topic)) {
    // Traces have a retention of their own and nobody acknowledges them.
    TracingPolicy t = effective.tracing.value_or(TracingPolicy{});
    return {minutes_to_ms(t.retention_minutes), mb_to_bytes(t.retention_size_mb), RetentionSource::kTracing};
  }
  if (effective.retention) {
    return {minutes_to_ms(effective.retention->time_minutes), mb_to_bytes(effective.retention->size_mb),
            from_topic ? RetentionSource::kTopic : RetentionSource::kNamespace};
  }
  if (origin == TopicOrigin::kKafka) {
    return {defaults.kafka_time_ms, defaults.kafka_size_bytes, RetentionSource::kKafkaDefault};
  }
  return {0, 0, RetentionSource::kPulsarDefault};
}

}  // namespace magnetar::broker
