#include "security/authorizer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include "broker/policy_cache.h"
#include "broker/tenancy.h"
#include "metadata/leveldb_store.h"

namespace magnetar::security {
namespace {

using broker::NamespaceName;
using broker::NamespacePolicies;
using broker::TopicAction;
using broker::TopicName;
using common::Status;

class AuthorizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("magnetar-authorizer-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    store_ = std::make_unique<metadata::LevelDbStore>(metadata::LevelDbStore::Options{dir_.string()});
    ASSERT_TRUE(store_->start().is_ok());
    tenancy_ = std::make_unique<broker::Tenancy>(*store_, broker::BootstrapDefaults{});
    ASSERT_TRUE(tenancy_->start().is_ok());
    ASSERT_TRUE(tenancy_->create_tenant("acme", broker::TenantInfo{{"acme-admin"}, {"standalone"}}).is_ok());
    ASSERT_TRUE(tenancy_->create_namespace(ns_, {}).is_ok());
    cache_ = std::make_unique<broker::PolicyCache>(*store_);
    ASSERT_TRUE(cache_->start().is_ok());
    authorizer_ = std::make_unique<Authorizer>(*cache_, std::set<std::string>{"root"});
  }
  void TearDown() override {
    authorizer_.reset();
    cache_.reset();
    tenancy_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  // Changes the namespace's policies and waits until the cache has them.
  void change(const std::function<void(NamespacePolicies&)>& edit) {
    uint64_t before = cache_->refreshes();
    ASSERT_TRUE(tenancy_->update_policies(ns_, [&](NamespacePolicies& p) {
                          edit(p);
                          return Status::ok();
                        }).is_ok());
    wait_for_refresh(before);
  }
  // Grants `role` produce on `topic` and waits until the cache has it.
  void grant_on_topic(const TopicName& topic, const std::string& role) {
    uint64_t before = cache_->refreshes();
    ASSERT_TRUE(tenancy_->update_topic_policies(topic, [&](NamespacePolicies& p) {
                          p.permissions[role] = {"produce"};
                          return Status::ok();
                        }).is_ok());
    wait_for_refresh(before);
  }
  // Waits (10 s at most) for a change after `before` refreshes.
  void wait_for_refresh(uint64_t before) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (cache_->refreshes() == before && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_GT(cache_->refreshes(), before);
  }
  bool allowed(const std::string& role, const TopicName& t, TopicAction a) {
    return authorizer_->check(role, t, a).is_ok();
  }

  NamespaceName ns_{"acme", "orders"};
  TopicName topic_ = *TopicName::parse("persistent://acme/orders/created");
  std::filesystem::path dir_;
  std::unique_ptr<metadata::LevelDbStore> store_;
  std::unique_ptr<broker::Tenancy> tenancy_;
  std::unique_ptr<broker::PolicyCache> cache_;
  std::unique_ptr<Authorizer> authorizer_;
};

TEST_F(AuthorizerTest, SuperusersAndTenantAdminsMayDoEverythingInTheirScope) {
  EXPECT_TRUE(allowed("root", topic_, TopicAction::kProduce));
  EXPECT_TRUE(allowed("acme-admin", topic_, TopicAction::kConsume));
  EXPECT_TRUE(authorizer_->check_tenant_admin("acme-admin", "acme").is_ok());
  EXPECT_FALSE(authorizer_->check_tenant_admin("acme-admin", "public").is_ok());
  EXPECT_FALSE(authorizer_->check_superuser("acme-admin").is_ok());
  EXPECT_FALSE(allowed("acme-admin", *TopicName::parse("persistent://public/default/x"), TopicAction::kLookup));
  Status refused = authorizer_->check("nobody", topic_, TopicAction::kProduce);
  EXPECT_EQ(refused.code(), common::ErrorCode::kPermissionDenied);
  EXPECT_NE(refused.message().find("nobody"), std::string::npos);
}

TEST_F(AuthorizerTest, NamespaceGrantsGiveExactlyTheirActions) {
  change([](NamespacePolicies& p) { p.permissions["reader"] = {"consume"}; });
  EXPECT_TRUE(allowed("reader", topic_, TopicAction::kConsume));
  EXPECT_TRUE(allowed("reader", topic_, TopicAction::kLookup));
  EXPECT_FALSE(allowed("reader", topic_, TopicAction::kProduce));
}

TEST_F(AuthorizerTest, TopicGrantsAddToNamespaceGrants) {
  change([](NamespacePolicies& p) { p.permissions["reader"] = {"consume"}; });
  ASSERT_TRUE(tenancy_->create_partitioned_topic(topic_, 2).is_ok());
  grant_on_topic(topic_, "writer");
  // The topic's own grant, also on its partitions; the namespace's grant
  // still holds on the topic.
  EXPECT_TRUE(allowed("writer", topic_, TopicAction::kProduce));
  EXPECT_TRUE(allowed("writer", topic_.partition_of(1), TopicAction::kProduce));
  EXPECT_FALSE(allowed("writer", *TopicName::parse("persistent://acme/orders/other"), TopicAction::kProduce));
  EXPECT_TRUE(allowed("reader", topic_, TopicAction::kConsume));
}

TEST_F(AuthorizerTest, SubscriptionRolesAdmitOnlyTheirRoles) {
  change([](NamespacePolicies& p) {
    p.permissions["alice"] = {"consume"};
    p.permissions["bob"] = {"consume"};
    p.subscription_roles["billing"] = {"alice"};
  });
  EXPECT_TRUE(authorizer_->check_subscription("alice", ns_, "billing").is_ok());
  Status refused = authorizer_->check_subscription("bob", ns_, "billing");
  EXPECT_EQ(refused.code(), common::ErrorCode::kPermissionDenied);
  EXPECT_NE(refused.message().find("billing"), std::string::npos);
  EXPECT_TRUE(authorizer_->check_subscription("bob", ns_, "audit").is_ok());
  EXPECT_TRUE(authorizer_->check_subscription("acme-admin", ns_, "billing").is_ok());
}

TEST_F(AuthorizerTest, PrefixModeWantsTheRoleAtTheStartOfTheName) {
  change([](NamespacePolicies& p) { p.subscription_auth_mode = broker::SubscriptionAuthMode::kPrefix; });
  EXPECT_TRUE(authorizer_->check_subscription("alice", ns_, "alice-orders").is_ok());
  EXPECT_FALSE(authorizer_->check_subscription("alice", ns_, "orders").is_ok());
  EXPECT_FALSE(authorizer_->check_subscription("bob", ns_, "alice-orders").is_ok());
  EXPECT_TRUE(authorizer_->check_subscription("root", ns_, "orders").is_ok());
}

TEST_F(AuthorizerTest, AnyGrantInTheNamespaceOrOnOneOfItsTopicsIsSomePermission) {
  EXPECT_TRUE(authorizer_->check_any_grant("root", ns_).is_ok());
  EXPECT_TRUE(authorizer_->check_any_grant("acme-admin", ns_).is_ok());
  Status refused = authorizer_->check_any_grant("writer", ns_);
  EXPECT_EQ(refused.code(), common::ErrorCode::kPermissionDenied);
  EXPECT_NE(refused.message().find("writer"), std::string::npos);
  // A grant on a topic of a namespace whose name extends this one's counts
  // there only.
  const NamespaceName longer{"acme", "orders2"};
  ASSERT_TRUE(tenancy_->create_namespace(longer, {}).is_ok());
  const TopicName elsewhere = *TopicName::parse("persistent://acme/orders2/created");
  for (const TopicName& t : {elsewhere, topic_}) {
    ASSERT_TRUE(tenancy_->create_partitioned_topic(t, 1).is_ok());
  }
  grant_on_topic(elsewhere, "writer");
  EXPECT_TRUE(authorizer_->check_any_grant("writer", longer).is_ok());
  EXPECT_FALSE(authorizer_->check_any_grant("writer", ns_).is_ok());
  grant_on_topic(topic_, "writer");
  EXPECT_TRUE(authorizer_->check_any_grant("writer", ns_).is_ok());
  change([](NamespacePolicies& p) { p.permissions["reader"] = {"consume"}; });
  EXPECT_TRUE(authorizer_->check_any_grant("reader", ns_).is_ok());
  EXPECT_FALSE(authorizer_->check_any_grant("reader", longer).is_ok());
}

}  // namespace
}  // namespace magnetar::security
