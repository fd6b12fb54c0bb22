#include "broker/tenancy.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "metadata/blocking.h"
#include "metadata/leveldb_store.h"

namespace magnetar::broker {
namespace {

using common::ErrorCode;

// Runs Tenancy over a real LevelDB store in a temporary directory. The
// blocking operations are called from the test thread, which is allowed: it
// is neither a reactor nor the metadata thread.
class TenancyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("magnetar-tenancy-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    start();
  }
  void TearDown() override {
    stop();
    std::filesystem::remove_all(dir_);
  }
  void start() {
    store_ = std::make_unique<metadata::LevelDbStore>(metadata::LevelDbStore::Options{dir_.string()});
    ASSERT_TRUE(store_->start().is_ok());
    tenancy_ = std::make_unique<Tenancy>(
        *store_, BootstrapDefaults{"standalone", {"http://localhost:8080", "", "pulsar://localhost:6650", "", "", ""},
                                   RetentionDefaults{}});
    ASSERT_TRUE(tenancy_->start().is_ok());
  }
  void stop() {
    if (tenancy_) tenancy_->stop();
    tenancy_.reset();
    if (store_) store_->stop();
    store_.reset();
  }
  NamespaceName ns(const char* t, const char* n) { return NamespaceName{t, n}; }

  std::filesystem::path dir_;
  std::unique_ptr<metadata::LevelDbStore> store_;
  std::unique_ptr<Tenancy> tenancy_;
};

TEST_F(TenancyTest, FirstStartCreatesDefaults) {
  EXPECT_EQ(*tenancy_->list_clusters(), std::vector<std::string>{"standalone"});
  EXPECT_EQ(*tenancy_->list_tenants(), (std::vector<std::string>{"public", "pulsar"}));
  EXPECT_EQ(*tenancy_->list_namespaces("public"), std::vector<std::string>{"public/default"});
  EXPECT_EQ(*tenancy_->list_namespaces("pulsar"), std::vector<std::string>{"pulsar/system"});
  EXPECT_EQ(tenancy_->get_tenant("public")->allowed_clusters, std::set<std::string>{"standalone"});
  EXPECT_EQ(tenancy_->get_cluster("standalone")->broker_service_url, "pulsar://localhost:6650");
}

TEST_F(TenancyTest, DefaultsAreNotRecreatedAfterDeletion) {
  ASSERT_TRUE(tenancy_->delete_namespace(ns("public", "default")).is_ok());
  stop();
  start();
  EXPECT_TRUE(tenancy_->list_namespaces("public")->empty());
}

TEST_F(TenancyTest, TenantLifecycleAndRules) {
  TenantInfo info{{"admin"}, {"standalone"}};
  ASSERT_TRUE(tenancy_->create_tenant("acme", info).is_ok());
  EXPECT_EQ(tenancy_->create_tenant("acme", info).code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(tenancy_->create_tenant("bad name", info).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(tenancy_->create_tenant("other", TenantInfo{{}, {"nowhere"}}).code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(tenancy_->get_tenant("other").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(*tenancy_->get_tenant("acme"), info);

  ASSERT_TRUE(tenancy_->create_namespace(ns("acme", "orders"), {}).is_ok());
  EXPECT_EQ(tenancy_->delete_tenant("acme").code(), ErrorCode::kFailedPrecondition);
  ASSERT_TRUE(tenancy_->delete_namespace(ns("acme", "orders")).is_ok());
  ASSERT_TRUE(tenancy_->delete_tenant("acme").is_ok());
  EXPECT_EQ(tenancy_->delete_tenant("acme").code(), ErrorCode::kNotFound);
}

TEST_F(TenancyTest, NamespacesNeedTheirTenant) {
  EXPECT_EQ(tenancy_->create_namespace(ns("ghost", "ns"), {}).code(), ErrorCode::kNotFound);
  EXPECT_EQ(tenancy_->create_namespace(ns("public", "default"), {}).code(), ErrorCode::kAlreadyExists);
  NamespacePolicies bad;
  bad.retention = RetentionPolicy{0, 5};
  EXPECT_EQ(tenancy_->create_namespace(ns("public", "x"), bad).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(tenancy_->get_policies(ns("public", "x")).status().code(), ErrorCode::kNotFound);
}

TEST_F(TenancyTest, UpdatePoliciesValidatesAndPersists) {
  auto d = ns("public", "default");
  ASSERT_TRUE(tenancy_->update_policies(d, [](NamespacePolicies& p) {
                        p.message_ttl_seconds = 30;
                        return common::Status::ok();
                      }).is_ok());
  // An invalid change writes nothing.
  EXPECT_EQ(tenancy_->update_policies(d, [](NamespacePolicies& p) {
                      p.message_ttl_seconds = 60;
                      p.persistence = PersistencePolicy{1, 2, 1, 0, FsyncMode::kAlways, 0};
                      return common::Status::ok();
                    }).code(),
            ErrorCode::kInvalidArgument);
  stop();
  start();
  auto p = tenancy_->get_policies(d);
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->message_ttl_seconds, 30);
  EXPECT_FALSE(p->persistence.has_value());
}

TEST_F(TenancyTest, ClustersInUseCannotBeDeleted) {
  ASSERT_TRUE(tenancy_->create_cluster("east", {}).is_ok());
  ASSERT_TRUE(tenancy_->create_tenant("acme", TenantInfo{{}, {"east"}}).is_ok());
  EXPECT_EQ(tenancy_->delete_cluster("east").code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(tenancy_->delete_cluster("standalone").code(), ErrorCode::kFailedPrecondition);
  ASSERT_TRUE(tenancy_->update_tenant("acme", TenantInfo{{}, {"standalone"}}).is_ok());
  EXPECT_TRUE(tenancy_->delete_cluster("east").is_ok());
  EXPECT_EQ(tenancy_->delete_cluster("east").code(), ErrorCode::kNotFound);
}

// A tenant whose home is another cluster takes its configuration from
// there and refuses edits here; its configuration round-trips.
TEST_F(TenancyTest, ATenantHomedElsewhereTakesItsConfigurationFromItsHomeOnly) {
  TenantConfiguration config;
  config.info = TenantInfo{{"ops"}, {"standalone", "east"}, "east"};  // "east" is not registered here
  config.limits = TenantLimits{};
  config.limits->max_namespaces = 5;
  NamespacePolicies orders;
  orders.message_ttl_seconds = 30;
  config.namespaces["acme/orders"] = orders;
  config.namespaces["acme/audit"] = NamespacePolicies{};
  config.partitioned_topics["persistent://acme/orders/parted"] = 3;
  NamespacePolicies capped;
  capped.max_producers_per_topic = 2;
  config.topic_policies["persistent://acme/orders/parted"] = capped;
  config.topic_policies["persistent://acme/orders/not-made-here-yet"] = orders;
  auto decoded = decode_configuration(encode_configuration(config));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
  ASSERT_TRUE(tenancy_->apply_configuration("acme", *decoded).is_ok());
  EXPECT_EQ(tenancy_->get_tenant("acme")->home_cluster, "east");
  EXPECT_EQ(tenancy_->get_tenant_limits("acme")->max_namespaces, 5);
  EXPECT_EQ(tenancy_->get_policies(*NamespaceName::parse("acme/orders"))->message_ttl_seconds, 30);
  EXPECT_EQ(*tenancy_->get_partitions(*TopicName::parse("persistent://acme/orders/parted")), 3);
  EXPECT_EQ(tenancy_->configuration_of("acme")->partitioned_topics, config.partitioned_topics);
  const auto parted = *TopicName::parse("persistent://acme/orders/parted");
  EXPECT_EQ(tenancy_->get_topic_policies(parted)->max_producers_per_topic, 2);
  EXPECT_EQ(tenancy_->configuration_of("acme")->topic_policies, config.topic_policies);
  EXPECT_EQ(tenancy_->update_topic_policies(parted, [](NamespacePolicies&) { return common::Status::ok(); }).code(),
            ErrorCode::kFailedPrecondition);
  // Edits here are refused, naming the home.
  common::Status refused = tenancy_->create_namespace(*NamespaceName::parse("acme/rogue"), {});
  EXPECT_EQ(refused.code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("home cluster 'east'"), std::string::npos) << refused.to_string();
  EXPECT_EQ(tenancy_->update_policies(*NamespaceName::parse("acme/orders"), [](NamespacePolicies&) {
              return common::Status::ok();
            }).code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(tenancy_->delete_namespace(*NamespaceName::parse("acme/audit")).code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(tenancy_->remove_tenant_limits("acme").code(), ErrorCode::kFailedPrecondition);
  // The home drops a namespace and a topic's overrides: they go here too.
  config.namespaces.erase("acme/audit");
  config.topic_policies.erase("persistent://acme/orders/parted");
  ASSERT_TRUE(tenancy_->apply_configuration("acme", config).is_ok());
  EXPECT_EQ(*tenancy_->list_namespaces("acme"), std::vector<std::string>{"acme/orders"});
  EXPECT_EQ(*tenancy_->get_topic_policies(parted), NamespacePolicies{});
  EXPECT_EQ(tenancy_->configuration_of("acme")->topic_policies.size(), 1u);
  // Taking the home over (the home is lost) makes edits possible here, and
  // the old home's configuration is refused from then on.
  ASSERT_TRUE(tenancy_->update_tenant("acme", TenantInfo{{"ops"}, {"standalone", "east"}, "standalone"}).is_ok());
  EXPECT_TRUE(tenancy_->create_namespace(*NamespaceName::parse("acme/after"), {}).is_ok());
  EXPECT_EQ(tenancy_->apply_configuration("acme", config).code(), ErrorCode::kFailedPrecondition);
}

TEST_F(TenancyTest, PartitionedTopics) {
  auto t = *TopicName::parse("persistent://public/default/orders");
  ASSERT_TRUE(tenancy_->create_partitioned_topic(t, 3).is_ok());
  EXPECT_EQ(tenancy_->create_partitioned_topic(t, 3).code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(*tenancy_->get_partitions(t), 3);
  EXPECT_EQ(*tenancy_->get_partitions(*TopicName::parse("public/default/plain")), 0);
  EXPECT_EQ(tenancy_->create_partitioned_topic(*TopicName::parse("public/default/x-partition-1"), 2).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(tenancy_->create_partitioned_topic(*TopicName::parse("public/default/y"), 0).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(tenancy_->create_partitioned_topic(*TopicName::parse("public/nope/y"), 1).code(), ErrorCode::kNotFound);

  EXPECT_EQ(tenancy_->update_partitions(t, 2).code(), ErrorCode::kInvalidArgument);
  ASSERT_TRUE(tenancy_->update_partitions(t, 4).is_ok());
  auto d = ns("public", "default");
  EXPECT_EQ(*tenancy_->list_partitioned_topics(d, TopicDomain::kPersistent),
            std::vector<std::string>{"persistent://public/default/orders"});
  EXPECT_TRUE(tenancy_->list_partitioned_topics(d, TopicDomain::kNonPersistent)->empty());
  auto topics = tenancy_->list_topics(d, TopicDomain::kPersistent);
  ASSERT_TRUE(topics.is_ok());
  ASSERT_EQ(topics->size(), 4u);
  EXPECT_EQ((*topics)[0], "persistent://public/default/orders-partition-0");

  EXPECT_EQ(tenancy_->delete_namespace(d).code(), ErrorCode::kFailedPrecondition);
  ASSERT_TRUE(tenancy_->delete_partitioned_topic(t).is_ok());
  EXPECT_EQ(tenancy_->delete_partitioned_topic(t).code(), ErrorCode::kNotFound);
  EXPECT_TRUE(tenancy_->delete_namespace(d).is_ok());
}

TEST_F(TenancyTest, TopicPolicyOverrides) {
  auto t = *TopicName::parse("persistent://public/default/orders");
  // Unknown topics have no overrides to set.
  EXPECT_EQ(tenancy_->get_topic_policies(t).status().code(), ErrorCode::kNotFound);
  auto set_ttl = [](int32_t ttl) {
    return [ttl](NamespacePolicies& p) {
      p.message_ttl_seconds = ttl;
      return common::Status::ok();
    };
  };
  EXPECT_EQ(tenancy_->update_topic_policies(t, set_ttl(5)).code(), ErrorCode::kNotFound);

  ASSERT_TRUE(tenancy_->create_partitioned_topic(t, 2).is_ok());
  EXPECT_EQ(*tenancy_->get_topic_policies(t), NamespacePolicies{});
  ASSERT_TRUE(tenancy_->update_topic_policies(t, set_ttl(5)).is_ok());
  ASSERT_TRUE(tenancy_->update_topic_policies(t.partition_of(1), set_ttl(7)).is_ok());
  EXPECT_EQ(tenancy_->get_topic_policies(t)->message_ttl_seconds, 5);
  EXPECT_EQ(tenancy_->get_topic_policies(t.partition_of(1))->message_ttl_seconds, 7);
  EXPECT_EQ(tenancy_->get_topic_policies(t.partition_of(2)).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(tenancy_->update_topic_policies(t, [](NamespacePolicies& p) {
                      p.max_producers_per_topic = -4;
                      return common::Status::ok();
                    }).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_FALSE(tenancy_->get_topic_policies(t)->max_producers_per_topic.has_value());

  // Overrides go with the topic, and with the namespace.
  ASSERT_TRUE(tenancy_->delete_topic_policies(t.partition_of(1)).is_ok());
  EXPECT_EQ(*tenancy_->get_topic_policies(t.partition_of(1)), NamespacePolicies{});
  EXPECT_TRUE(tenancy_->delete_topic_policies(t.partition_of(1)).is_ok());
  ASSERT_TRUE(tenancy_->update_topic_policies(t.partition_of(1), set_ttl(7)).is_ok());
  ASSERT_TRUE(tenancy_->delete_partitioned_topic(t).is_ok());
  ASSERT_TRUE(tenancy_->create_partitioned_topic(t, 2).is_ok());
  EXPECT_EQ(*tenancy_->get_topic_policies(t), NamespacePolicies{});
  EXPECT_EQ(*tenancy_->get_topic_policies(t.partition_of(1)), NamespacePolicies{});

  // Overrides left behind by a topic deleted elsewhere go with the namespace.
  ASSERT_TRUE(tenancy_->create_namespace({"public", "gone"}, {}).is_ok());
  auto leftover = *TopicName::parse("persistent://public/gone/x");
  ASSERT_TRUE(metadata::blocking::put(*store_, topic_policies_key(leftover), encode_policies({})).is_ok());
  // So do its bundles' owners and its split layout.
  ASSERT_TRUE(metadata::blocking::put(*store_, "/bundles/public/gone/0x00000000_0x40000000", "7").is_ok());
  ASSERT_TRUE(metadata::blocking::put(*store_, "/bundles/public/stays/0x00000000_0x40000000", "7").is_ok());
  ASSERT_TRUE(metadata::blocking::put(*store_, "/bundle-layouts/public/gone", "0x00000000,0xffffffff").is_ok());
  ASSERT_TRUE(tenancy_->delete_namespace({"public", "gone"}).is_ok());
  EXPECT_TRUE(metadata::blocking::list_children(*store_, "/admin/topic-policies/public/gone/persistent")->empty());
  auto owners = metadata::blocking::list_children(*store_, "/bundles/public/gone");
  EXPECT_TRUE(!owners.is_ok() || owners->empty());
  EXPECT_EQ(metadata::blocking::get(*store_, "/bundle-layouts/public/gone").status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(metadata::blocking::get(*store_, "/bundles/public/stays/0x00000000_0x40000000").is_ok());
}

TEST_F(TenancyTest, ConcurrentPolicyUpdatesLoseNothing) {
  // Threads race read-modify-write cycles on one namespace; compare-and-set
  // with retry must keep every change.
  constexpr int kThreads = 4;
  constexpr int kUpdatesEach = 25;
  auto d = ns("public", "default");
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t]() {
      for (int i = 0; i < kUpdatesEach; ++i) {
        std::string role = "r" + std::to_string(t) + "-" + std::to_string(i);
        auto st = tenancy_->update_policies(d, [&](NamespacePolicies& p) {
          p.permissions[role] = {"consume"};
          return common::Status::ok();
        });
        if (!st.is_ok()) failures.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(tenancy_->get_policies(d)->permissions.size(), size_t{kThreads * kUpdatesEach});
}

}  // namespace
}  // namespace magnetar::broker
