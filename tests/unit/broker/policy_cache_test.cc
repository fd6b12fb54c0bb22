#include "broker/policy_cache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include "broker/publish_limiter.h"
#include "broker/tenancy.h"
#include "metadata/leveldb_store.h"
#include "utils/eventually.h"

namespace magnetar::broker {
namespace {

using magnetar::test_util::eventually;

class PolicyCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("magnetar-policy-cache-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    store_ = std::make_unique<metadata::LevelDbStore>(metadata::LevelDbStore::Options{dir_.string()});
    ASSERT_TRUE(store_->start().is_ok());
    tenancy_ = std::make_unique<Tenancy>(*store_, BootstrapDefaults{});
    ASSERT_TRUE(tenancy_->start().is_ok());
  }
  void TearDown() override {
    cache_.reset();
    tenancy_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void start_cache() {
    cache_ = std::make_unique<PolicyCache>(*store_);
    ASSERT_TRUE(cache_->start().is_ok());
  }
  using PolicyChange = std::function<common::Status(NamespacePolicies&)>;
  static PolicyChange ttl(int32_t seconds) {
    return [seconds](NamespacePolicies& p) {
      p.message_ttl_seconds = seconds;
      return common::Status::ok();
    };
  }

  std::filesystem::path dir_;
  std::unique_ptr<metadata::LevelDbStore> store_;
  std::unique_ptr<Tenancy> tenancy_;
  std::unique_ptr<PolicyCache> cache_;
};

TEST_F(PolicyCacheTest, LoadsWhatExistsAndFollowsChanges) {
  NamespaceName d{"public", "default"};
  ASSERT_TRUE(tenancy_->update_policies(d, ttl(10)).is_ok());
  start_cache();
  auto p = cache_->namespace_policies(d);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->message_ttl_seconds, 10);
  EXPECT_NE(cache_->namespace_policies({"pulsar", "system"}), nullptr);
  EXPECT_EQ(cache_->namespace_policies({"public", "nope"}), nullptr);

  ASSERT_TRUE(tenancy_->update_policies(d, ttl(20)).is_ok());
  EXPECT_TRUE(eventually([&] { return cache_->namespace_policies(d)->message_ttl_seconds == 20; }));
  // The snapshot taken before is unchanged.
  EXPECT_EQ(p->message_ttl_seconds, 10);

  NamespaceName fresh{"public", "fresh"};
  ASSERT_TRUE(tenancy_->create_namespace(fresh, {}).is_ok());
  EXPECT_TRUE(eventually([&] { return cache_->namespace_policies(fresh) != nullptr; }));
  ASSERT_TRUE(tenancy_->delete_namespace(fresh).is_ok());
  EXPECT_TRUE(eventually([&] { return cache_->namespace_policies(fresh) == nullptr; }));
}

TEST_F(PolicyCacheTest, EffectivePoliciesLayerTopicPartitionedTopicAndNamespace) {
  start_cache();
  auto topic = *TopicName::parse("persistent://public/default/orders");
  ASSERT_TRUE(tenancy_->create_partitioned_topic(topic, 2).is_ok());
  ASSERT_TRUE(tenancy_->update_policies(topic.ns, [](NamespacePolicies& p) {
                        p.message_ttl_seconds = 100;
                        p.max_producers_per_topic = 7;
                        p.deduplication = true;
                        return common::Status::ok();
                      }).is_ok());
  ASSERT_TRUE(tenancy_->update_topic_policies(topic, [](NamespacePolicies& p) {
                        p.message_ttl_seconds = 50;
                        p.max_producers_per_topic = 3;
                        return common::Status::ok();
                      }).is_ok());
  auto partition = topic.partition_of(1);
  ASSERT_TRUE(tenancy_->update_topic_policies(partition, ttl(5)).is_ok());

  ASSERT_TRUE(eventually([&] {
    auto e = cache_->effective(partition);
    return e && e->message_ttl_seconds == 5 && e->max_producers_per_topic == 3 && e->deduplication == true;
  }));
  auto other = cache_->effective(topic.partition_of(0));
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->message_ttl_seconds, 50);
  EXPECT_FALSE(cache_->effective(*TopicName::parse("persistent://public/nope/x")).has_value());

  ASSERT_TRUE(tenancy_->delete_partitioned_topic(topic).is_ok());
  EXPECT_TRUE(eventually([&] { return cache_->topic_policies(topic) == nullptr; }));
  EXPECT_TRUE(eventually([&] { return cache_->effective(partition)->message_ttl_seconds == 100; }));
}

TEST_F(PolicyCacheTest, AutoTopicCreationFollowsTheNamespace) {
  start_cache();
  auto topic = *TopicName::parse("persistent://public/default/new-topic");
  AutoTopicCreation broker_default{true, false, 0};
  EXPECT_EQ(cache_->auto_topic_creation(topic, broker_default), broker_default);
  EXPECT_FALSE(cache_->auto_topic_creation(*TopicName::parse("persistent://public/none/t"), broker_default));
  ASSERT_TRUE(tenancy_->update_policies(topic.ns, [](NamespacePolicies& p) {
                        p.auto_topic_creation = AutoTopicCreation{false, false, 0};
                        return common::Status::ok();
                      }).is_ok());
  EXPECT_TRUE(eventually([&] { return !cache_->auto_topic_creation(topic, broker_default)->allow; }));
  ASSERT_TRUE(tenancy_->update_policies(topic.ns, [](NamespacePolicies& p) {
                        p.auto_topic_creation = AutoTopicCreation{true, true, 4};
                        return common::Status::ok();
                      }).is_ok());
  EXPECT_TRUE(eventually([&] { return cache_->auto_topic_creation(topic, broker_default)->default_partitions == 4; }));
}

TEST_F(PolicyCacheTest, StoppedCacheIgnoresLaterChanges) {
  start_cache();
  cache_->stop();
  uint64_t before = cache_->refreshes();
  ASSERT_TRUE(tenancy_->update_policies({"public", "default"}, ttl(1)).is_ok());
  // A write after stop() notifies nobody; the next write's round trip shows
  // the first one was fully applied and ignored.
  ASSERT_TRUE(tenancy_->update_policies({"public", "default"}, ttl(2)).is_ok());
  EXPECT_EQ(cache_->refreshes(), before);
  cache_.reset();  // destroying it with nothing pending is fine
}

TEST(PolicyScopeTest, NamesWhatAChangedRecordCovers) {
  auto a = *TopicName::parse("persistent://acme/ns/a");
  auto a0 = *TopicName::parse("persistent://acme/ns/a-partition-0");
  auto ab = *TopicName::parse("persistent://acme/ns/ab");
  auto other_ns = *TopicName::parse("persistent://acme/other/a");
  auto other_tenant = *TopicName::parse("persistent://zeta/ns/a");

  auto limits = PolicyScope::of_key(tenant_limits_key("acme"));
  ASSERT_TRUE(limits);
  EXPECT_EQ(limits->kind, PolicyScope::Kind::kTenantLimits);
  EXPECT_TRUE(limits->covers(a) && limits->covers(other_ns));
  EXPECT_FALSE(limits->covers(other_tenant));

  auto ns = PolicyScope::of_key(namespace_key({"acme", "ns"}));
  ASSERT_TRUE(ns);
  EXPECT_TRUE(ns->covers(a) && ns->covers(a0));
  EXPECT_FALSE(ns->covers(other_ns) || ns->covers(other_tenant));

  auto topic = PolicyScope::of_key(topic_policies_key(a));
  ASSERT_TRUE(topic);
  EXPECT_EQ(topic->kind, PolicyScope::Kind::kTopic);
  EXPECT_TRUE(topic->covers(a) && topic->covers(a0));  // a partitioned topic's override reaches its partitions
  EXPECT_FALSE(topic->covers(ab) || topic->covers(other_ns));
  auto partition = PolicyScope::of_key(topic_policies_key(a0));
  ASSERT_TRUE(partition);
  EXPECT_TRUE(partition->covers(a0));
  EXPECT_FALSE(partition->covers(a));

  EXPECT_EQ(PolicyScope::of_key(tenant_key("acme"))->kind, PolicyScope::Kind::kTenant);
  EXPECT_FALSE(PolicyScope::of_key("/admin/policies/acme"));
  EXPECT_FALSE(PolicyScope::of_key("/managed-ledgers/acme/ns/persistent/a"));
  EXPECT_FALSE(PolicyScope::of_key("/admin/topic-policies/acme/ns/nowhere/a"));
}

TEST_F(PolicyCacheTest, PublishLimitsFollowOnlyTheChangesThatCoverThem) {
  start_cache();
  const NamespaceName def{"public", "default"};
  const NamespaceName other{"public", "other"};
  ASSERT_TRUE(tenancy_->create_namespace(other, {}).is_ok());
  auto tenants = std::make_shared<TenantRegistry>(cache_.get());
  PublishLimiters limiters(cache_.get(), tenants);
  auto a = limiters.for_topic(*TopicName::parse("persistent://public/default/a"));
  auto b = limiters.for_topic(*TopicName::parse("persistent://public/other/b"));
  EXPECT_FALSE(a->own().limited() || b->own().limited());
  EXPECT_EQ(tenants->size(), 1u);  // one state for the tenant, shared

  auto rate = [](int64_t msgs) {
    return [msgs](NamespacePolicies& p) {
      p.publish_rate = PublishRate{msgs, -1};
      return common::Status::ok();
    };
  };
  ASSERT_TRUE(tenancy_->update_policies(def, rate(100)).is_ok());
  ASSERT_TRUE(tenancy_->update_policies(other, rate(200)).is_ok());
  ASSERT_TRUE(eventually([&] {
    auto pb = cache_->effective(b->topic());
    auto pa = cache_->effective(a->topic());
    return pa && pa->publish_rate && pb && pb->publish_rate;
  }));
  // Only the changed namespace's topics are read again.
  limiters.refresh(*PolicyScope::of_key(namespace_key(def)));
  EXPECT_EQ(a->own().messages.rate(), 100);
  EXPECT_FALSE(b->own().limited());
  limiters.refresh(*PolicyScope::of_key(namespace_key(other)));
  EXPECT_EQ(b->own().messages.rate(), 200);

  // A tenant's limits reach its state's buckets (publish and dispatch) and
  // switch its topics' charging on.
  TenantLimits limits;
  limits.publish_msgs_per_second = 1000;
  limits.dispatch_msgs_per_second = 50;
  ASSERT_TRUE(tenancy_->set_tenant_limits("public", limits).is_ok());
  ASSERT_TRUE(eventually([&] { return cache_->tenant_limits("public") != nullptr; }));
  auto changed = *PolicyScope::of_key(tenant_limits_key("public"));
  tenants->refresh("public");
  limiters.refresh(changed);
  EXPECT_EQ(a->tenant()->messages.rate(), 1000);
  EXPECT_EQ(tenants->find("public")->dispatch.messages.rate(), 50);
  EXPECT_GT(a->charge(1000, 1), 0);  // the tenant's tenth of a second is spent, and more

  // Nobody holds the tenant's state any more: the registry forgets it.
  a.reset();
  b.reset();
  EXPECT_EQ(tenants->size(), 0u);
  EXPECT_EQ(tenants->find("public"), nullptr);
  EXPECT_EQ(tenants->of("public")->dispatch.messages.rate(), 50);  // read again when made again
}

}  // namespace
}  // namespace magnetar::broker
