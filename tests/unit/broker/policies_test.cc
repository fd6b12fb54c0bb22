#include "broker/policies.h"

#include <gtest/gtest.h>

namespace magnetar::broker {
namespace {

using common::ErrorCode;

NamespacePolicies everything_set() {
  NamespacePolicies p;
  p.retention = RetentionPolicy{60, 1024};
  p.message_ttl_seconds = 3600;
  p.backlog_quota_size = BacklogQuota{1 << 20, -1, BacklogQuotaAction::kProducerException};
  p.backlog_quota_age = BacklogQuota{-1, 600, BacklogQuotaAction::kConsumerBacklogEviction};
  p.persistence = PersistencePolicy{3, 2, 2, 1.5, FsyncMode::kInterval, 50};
  p.deduplication = false;
  p.permissions["alice"] = {"produce", "consume"};
  p.permissions["bob"] = {"consume"};
  p.subscription_roles["billing"] = {"alice", "carol"};
  p.subscription_roles["audit"] = {};
  p.subscription_auth_mode = SubscriptionAuthMode::kPrefix;
  p.publish_rate = PublishRate{1000, -1};
  p.dispatch_rate = DispatchRate{500, 1 << 20, 2, true};
  p.subscription_dispatch_rate = DispatchRate{10, -1, 1, false};
  p.max_producers_per_topic = 0;  // set to zero is not the same as unset
  p.max_consumers_per_topic = 5;
  p.max_consumers_per_subscription = 6;
  p.max_subscriptions_per_topic = 7;
  p.max_topics_per_namespace = 8;
  p.subscription_expiration_minutes = 9;
  p.max_unacked_messages_per_consumer = 10;
  p.max_unacked_messages_per_subscription = 0;
  p.auto_topic_creation = AutoTopicCreation{true, true, 4};
  p.replication_clusters = {"standalone"};
  return p;
}

TEST(PoliciesTest, RoundTripEverySetField) {
  NamespacePolicies p = everything_set();
  ASSERT_TRUE(validate(p).is_ok()) << validate(p).to_string();
  auto back = decode_policies(encode_policies(p));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(*back, p);
}

TEST(PoliciesTest, RoundTripUnsetStaysUnset) {
  auto back = decode_policies(encode_policies(NamespacePolicies{}));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(*back, NamespacePolicies{});
  EXPECT_FALSE(back->message_ttl_seconds.has_value());
  EXPECT_FALSE(back->deduplication.has_value());
}

TEST(PoliciesTest, APersistencePolicyWithoutFsyncModeKeepsTheNodes) {
  NamespacePolicies p;
  p.persistence = PersistencePolicy{2, 2, 1, 0, std::nullopt, 0};
  auto back = decode_policies(encode_policies(p));
  ASSERT_TRUE(back.is_ok());
  ASSERT_TRUE(back->persistence.has_value());
  EXPECT_FALSE(back->persistence->fsync_mode.has_value());
  EXPECT_EQ(*back, p);
}

TEST(PoliciesTest, TenantsClustersPartitions) {
  TenantInfo t{{"admin"}, {"standalone", "east"}};
  EXPECT_EQ(*decode_tenant(encode_tenant(t)), t);
  ClusterInfo c{"http://h:8080", "", "pulsar://h:6650", "", "", ""};
  EXPECT_EQ(*decode_cluster(encode_cluster(c)), c);
  ClusterInfo with_auth{"http://h:8080", "", "pulsar://h:6650", "", "AuthenticationToken", "token:abc"};
  EXPECT_EQ(*decode_cluster(encode_cluster(with_auth)), with_auth);
  EXPECT_EQ(*decode_partitions(encode_partitions(12)), 12);
  EXPECT_EQ(decode_tenant("garbage").status().code(), ErrorCode::kCorruption);
}

TEST(PoliciesTest, TenantLimitsRoundTripEveryField) {
  TenantLimits l{1, 2, 3, 4, 5, 6, 7, int64_t{8} << 40, 9, 10};
  EXPECT_EQ(*decode_tenant_limits(encode_tenant_limits(l)), l);
  EXPECT_EQ(*decode_tenant_limits(encode_tenant_limits(TenantLimits{})), TenantLimits{});
  EXPECT_EQ(decode_tenant_limits("garbage").status().code(), ErrorCode::kCorruption);
  TenantLimits bad;
  bad.storage_quota_bytes = -2;
  EXPECT_EQ(validate(bad).code(), ErrorCode::kInvalidArgument);
}

TEST(PoliciesTest, ValidationRules) {
  EXPECT_FALSE(validate(RetentionPolicy{-2, 10}).is_ok());
  EXPECT_FALSE(validate(RetentionPolicy{0, 10}).is_ok());
  EXPECT_TRUE(validate(RetentionPolicy{-1, -1}).is_ok());
  EXPECT_TRUE(validate(RetentionPolicy{0, 0}).is_ok());
  EXPECT_FALSE(validate(PersistencePolicy{1, 2, 1, 0, FsyncMode::kAlways, 0}).is_ok());
  EXPECT_FALSE(validate(PersistencePolicy{3, 2, 3, 0, FsyncMode::kAlways, 0}).is_ok());
  EXPECT_FALSE(validate(PersistencePolicy{1, 1, 1, 0, FsyncMode::kInterval, 0}).is_ok());
  EXPECT_FALSE(validate(PersistencePolicy{1, 1, 1, -1, FsyncMode::kAlways, 0}).is_ok());
  EXPECT_FALSE(validate(DispatchRate{1, 1, 0, false}).is_ok());
  EXPECT_FALSE(validate(AutoTopicCreation{true, true, 0}).is_ok());
  EXPECT_FALSE(validate(AutoTopicCreation{true, false, 3}).is_ok());
  NamespacePolicies p;
  p.permissions["r"] = {"produce", "fly"};
  EXPECT_EQ(validate(p).code(), ErrorCode::kInvalidArgument);
  p.permissions.clear();
  p.max_consumers_per_topic = -1;
  EXPECT_FALSE(validate(p).is_ok());
  EXPECT_TRUE(parse_backlog_action("consumer_backlog_eviction").is_ok());
  EXPECT_FALSE(parse_backlog_action("drop").is_ok());
  EXPECT_EQ(*parse_fsync_mode(fsync_mode_name(FsyncMode::kNever)), FsyncMode::kNever);
}

}  // namespace
}  // namespace magnetar::broker
