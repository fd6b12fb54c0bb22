#include "broker/retention.h"

#include <gtest/gtest.h>

namespace magnetar::broker {
namespace {

TopicName topic(const std::string& local) { return *TopicName::of(TopicDomain::kPersistent, "t", "ns", local); }

TEST(RetentionTest, AKafkaTopicWithoutPoliciesKeepsKafkasDefault) {
  RetentionDefaults defaults;
  auto r = retention_in_effect(topic("orders"), NamespacePolicies{}, false, TopicOrigin::kKafka, defaults);
  EXPECT_EQ(r.time_ms, 7LL * 24 * 3600 * 1000);
  EXPECT_EQ(r.size_bytes, -1);
  EXPECT_EQ(r.source, RetentionSource::kKafkaDefault);
  defaults.kafka_time_ms = 5000;
  defaults.kafka_size_bytes = 1 << 20;
  r = retention_in_effect(topic("orders"), NamespacePolicies{}, false, TopicOrigin::kKafka, defaults);
  EXPECT_EQ(r.time_ms, 5000);
  EXPECT_EQ(r.size_bytes, 1 << 20);
}

TEST(RetentionTest, APulsarTopicWithoutPoliciesKeepsNothingPastConsumption) {
  auto r = retention_in_effect(topic("orders"), NamespacePolicies{}, false, TopicOrigin::kPulsar, RetentionDefaults{});
  EXPECT_EQ(r.time_ms, 0);
  EXPECT_EQ(r.size_bytes, 0);
  EXPECT_EQ(r.source, RetentionSource::kPulsarDefault);
}

TEST(RetentionTest, APolicySetOnTheTopicOrItsNamespaceWinsOverEitherDefault) {
  NamespacePolicies p;
  p.retention = RetentionPolicy{60, 10};
  for (TopicOrigin origin : {TopicOrigin::kKafka, TopicOrigin::kPulsar}) {
    auto r = retention_in_effect(topic("orders"), p, false, origin, RetentionDefaults{});
    EXPECT_EQ(r.time_ms, 3'600'000);
    EXPECT_EQ(r.size_bytes, 10 << 20);
    EXPECT_EQ(r.source, RetentionSource::kNamespace);
    EXPECT_EQ(retention_in_effect(topic("orders"), p, true, origin, RetentionDefaults{}).source,
              RetentionSource::kTopic);
  }
  p.retention = RetentionPolicy{-1, -1};
  auto forever = retention_in_effect(topic("orders"), p, true, TopicOrigin::kKafka, RetentionDefaults{});
  EXPECT_EQ(forever.time_ms, -1);
  EXPECT_EQ(forever.size_bytes, -1);
}

TEST(RetentionTest, AnUnknownOriginByteIsPulsar) {
  EXPECT_EQ(origin_from_byte(0), TopicOrigin::kPulsar);
  EXPECT_EQ(origin_from_byte(1), TopicOrigin::kKafka);
  EXPECT_EQ(origin_from_byte(77), TopicOrigin::kPulsar);
  EXPECT_EQ(retention_source_name(RetentionSource::kKafkaDefault), "kafka-default");
}

}  // namespace
}  // namespace magnetar::broker
