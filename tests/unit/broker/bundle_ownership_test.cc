#include "broker/bundle_ownership.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <thread>

#include "broker/bundle_layout.h"
#include "broker/tenancy.h"
#include "metadata/blocking.h"
#include "metadata/leveldb_store.h"
#include "utils/eventually.h"
#include "utils/forwarding_store.h"

namespace magnetar::broker {
namespace {

using magnetar::test_util::eventually;

constexpr uint64_t kSelf = 1;

// The store, with its reads held back while asked to: a read slow to answer
// (in a cluster, reads go to the leader; a watch's notification comes from
// the log this member applies).
class HeldReads final : public test_util::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  // Holds the reads from now on, or answers those held and holds no more.
  void hold(bool on) {
    std::vector<std::function<void()>> held;
    {
      std::lock_guard lock(mu_);
      holding_ = on;
      if (!on) held.swap(held_);
    }
    for (auto& read : held) read();
  }

  void get(std::string key, metadata::Callback<common::Result<metadata::Record>> done) override {
    {
      std::lock_guard lock(mu_);
      if (holding_) {
        held_.push_back([this, key, done]() { inner_.get(key, done); });
        return;
      }
    }
    inner_.get(std::move(key), std::move(done));
  }

 private:
  std::mutex mu_;
  bool holding_ = false;
  std::vector<std::function<void()>> held_;
};

class BundleOwnershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("magnetar-bundles-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    store_ = std::make_unique<metadata::LevelDbStore>(metadata::LevelDbStore::Options{dir_.string()});
    ASSERT_TRUE(store_->start().is_ok());
    reads_ = std::make_unique<HeldReads>(*store_);
    tenancy_ = std::make_unique<Tenancy>(*store_, BootstrapDefaults{});
    ASSERT_TRUE(tenancy_->start().is_ok());
    for (uint64_t id : {uint64_t{1}, uint64_t{2}, uint64_t{3}}) alive_[id] = true;
  }
  void TearDown() override {
    if (ownership_) ownership_->stop();
    ownership_.reset();
    set_layout("public/default", std::nullopt);  // the process's view outlives the test
    tenancy_.reset();
    reads_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  void start(std::chrono::milliseconds failover_after = std::chrono::milliseconds(0)) {
    ownership_ = std::make_unique<BundleOwnership>(*reads_, kSelf, [this]() {
      std::lock_guard lock(mu_);
      std::vector<std::pair<NodeEndpoints, bool>> out;
      for (auto [id, live] : alive_) {
        NodeEndpoints n;
        n.node = id;
        n.pulsar_url = "pulsar://node" + std::to_string(id);
        out.emplace_back(n, live);
      }
      return out;
    });
    ownership_->set_lease([this]() { return lease_.load(); });
    ownership_->set_directory_max_age(std::chrono::milliseconds(0));  // set_alive() is seen at once
    ownership_->set_failover_after(failover_after);
    ownership_->set_unloader([this](const std::string& bundle, std::function<void()> done) {
      // May run on the store's thread (a watch): nothing here waits for the store.
      auto mine = ownership_->bundles_of(kSelf);
      {
        std::lock_guard lock(mu_);
        unloads_.push_back(bundle);
        owned_at_unload_.push_back(std::find(mine.begin(), mine.end(), bundle) != mine.end());
      }
      done();
    });
    ASSERT_TRUE(ownership_->start().is_ok());
  }

  void set_alive(uint64_t id, bool live) {
    std::lock_guard lock(mu_);
    alive_[id] = live;
  }
  uint64_t owner(const TopicName& topic) {
    std::promise<common::Result<NodeEndpoints>> p;
    ownership_->owner_of(topic, [&p](common::Result<NodeEndpoints> r) { p.set_value(std::move(r)); });
    auto r = p.get_future().get();
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r.is_ok() ? r->node : 0;
  }
  std::string stored(const TopicName& topic) {
    auto record = metadata::blocking::get(*store_, BundleOwnership::bundle_key(topic));
    return record.is_ok() ? record->value : "";
  }
  void write(const TopicName& topic, uint64_t node) {
    ASSERT_TRUE(metadata::blocking::put(*store_, BundleOwnership::bundle_key(topic), std::to_string(node)).is_ok());
  }
  // One topic name per bundle of public/default.
  std::map<std::string, TopicName> one_topic_per_bundle() {
    std::map<std::string, TopicName> out;
    for (int i = 0; out.size() < kBundlesPerNamespace && i < 10000; ++i) {
      auto t = TopicName::parse("persistent://public/default/t" + std::to_string(i));
      out.emplace(bundle_of(*t), *t);
    }
    return out;
  }

  std::filesystem::path dir_;
  std::unique_ptr<metadata::LevelDbStore> store_;
  std::unique_ptr<HeldReads> reads_;  // what the ownership reads through
  std::unique_ptr<Tenancy> tenancy_;
  std::unique_ptr<BundleOwnership> ownership_;
  std::mutex mu_;
  std::map<uint64_t, bool> alive_;
  std::atomic<bool> lease_{true};
  std::vector<std::string> unloads_;
  std::vector<bool> owned_at_unload_;
};

TEST_F(BundleOwnershipTest, EveryBundleGoesToALiveNodeAndTheyAreSpread) {
  start();
  std::map<uint64_t, int> per_node;
  for (auto& [bundle, topic] : one_topic_per_bundle()) per_node[owner(topic)]++;
  EXPECT_EQ(per_node.size(), 3u);
  for (auto& [node, count] : per_node) EXPECT_TRUE(node >= 1 && node <= 3) << node;
  auto bundles = ownership_->bundles_in(NamespaceName{"public", "default"});
  ASSERT_EQ(bundles.size(), kBundlesPerNamespace);
  for (const auto& b : bundles) EXPECT_NE(b.node, 0u);
}

TEST_F(BundleOwnershipTest, ADeadOwnersBundleMovesAtLookupOnlyWhileThisNodesLeaseIsCurrent) {
  auto topic = *TopicName::parse("persistent://public/default/moving");
  write(topic, 2);
  start();
  EXPECT_EQ(owner(topic), 2u);
  set_alive(2, false);
  lease_ = false;  // a node that cannot trust its view of who is alive moves nothing
  EXPECT_EQ(owner(topic), 2u);
  EXPECT_EQ(stored(topic), "2");
  lease_ = true;
  EXPECT_FALSE(ownership_->known_owner(topic).has_value());  // a dead owner is no answer
  uint64_t now = owner(topic);
  EXPECT_TRUE(now == 1 || now == 3) << now;
  EXPECT_EQ(stored(topic), std::to_string(now));
}

TEST_F(BundleOwnershipTest, ADeadOwnerKeepsItsBundlesForTheFailoverDelay) {
  auto topic = *TopicName::parse("persistent://public/default/waits");
  write(topic, 2);
  start(std::chrono::hours(1));
  set_alive(2, false);
  EXPECT_EQ(owner(topic), 2u);
  EXPECT_EQ(stored(topic), "2");
}

TEST_F(BundleOwnershipTest, AReleaseClosesTheTopicsBeforeItWritesTheNewOwner) {
  auto topic = *TopicName::parse("persistent://public/default/released");
  write(topic, kSelf);
  start();
  std::promise<common::Status> p;
  ownership_->release(qualified_bundle(topic), 3, [&p](common::Status st) { p.set_value(st); });
  auto st = p.get_future().get();
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(stored(topic), "3");
  EXPECT_FALSE(ownership_->releasing(topic));
  std::lock_guard lock(mu_);
  ASSERT_FALSE(unloads_.empty());
  EXPECT_EQ(unloads_[0], qualified_bundle(topic));
  EXPECT_TRUE(owned_at_unload_[0]);  // still this node's while its topics closed
}

TEST_F(BundleOwnershipTest, AReleaseOfABundleOwnedElsewhereOrToADeadNodeIsRefused) {
  auto mine = *TopicName::parse("persistent://public/default/mine");
  start();
  write(mine, kSelf);
  ASSERT_TRUE(eventually([&]() { return ownership_->known_owner(mine).has_value(); }));
  set_alive(3, false);
  std::promise<common::Status> dead;
  ownership_->release(qualified_bundle(mine), 3, [&dead](common::Status st) { dead.set_value(st); });
  EXPECT_EQ(dead.get_future().get().code(), common::ErrorCode::kInvalidArgument);
  EXPECT_EQ(stored(mine), "1");
  std::promise<common::Status> nowhere;
  ownership_->release("public/default/0x00000000_0x00000001", 0, [&nowhere](common::Status st) {
    nowhere.set_value(st);
  });
  EXPECT_EQ(nowhere.get_future().get().code(), common::ErrorCode::kFailedPrecondition);
}

TEST_F(BundleOwnershipTest, ABundleTakenAwayClosesItsTopicsHere) {
  auto topic = *TopicName::parse("persistent://public/default/taken");
  write(topic, kSelf);
  start();
  write(topic, 2);  // another node moved it (this one was thought dead)
  ASSERT_TRUE(eventually([&]() {
    std::lock_guard lock(mu_);
    return !unloads_.empty();
  }));
  std::lock_guard lock(mu_);
  EXPECT_EQ(unloads_[0], qualified_bundle(topic));
}

TEST_F(BundleOwnershipTest, ABundleAnnouncedChangedIsNoAnswerUntilItsReadAnswers) {
  auto topic = *TopicName::parse("persistent://public/default/announced");
  write(topic, kSelf);
  start();
  ASSERT_EQ(owner(topic), kSelf);
  ASSERT_TRUE(ownership_->known_owner(topic).has_value());
  // Moved while this node was away; it applies the change, and its read of
  // the new owner is slow to answer. Meanwhile it must not name itself.
  reads_->hold(true);
  write(topic, 2);
  EXPECT_TRUE(eventually([&]() { return !ownership_->known_owner(topic).has_value(); }));
  {
    std::lock_guard lock(mu_);
    EXPECT_TRUE(unloads_.empty());  // the new owner is not read yet
  }
  reads_->hold(false);
  ASSERT_TRUE(eventually([&]() {
    std::lock_guard lock(mu_);
    return !unloads_.empty();
  }));
  auto known = ownership_->known_owner(topic);
  ASSERT_TRUE(known.has_value());
  EXPECT_EQ(known->node, 2u);
  EXPECT_EQ(owner(topic), 2u);
}

// A topic's log fenced by another node: what this node has cached about
// the bundle is doubted and read again. Still its own: it is named so
// again and nothing closes.
TEST_F(BundleOwnershipTest, ADoubtedBundleStillOwnedHereIsNamedSoAgain) {
  auto topic = *TopicName::parse("persistent://public/default/doubted");
  write(topic, kSelf);
  start();
  ASSERT_EQ(owner(topic), kSelf);
  reads_->hold(true);
  ownership_->doubt(topic);
  EXPECT_FALSE(ownership_->known_owner(topic).has_value());  // no answer until the store's
  reads_->hold(false);
  ASSERT_TRUE(eventually([&]() { return ownership_->known_owner(topic).has_value(); }));
  EXPECT_TRUE(ownership_->known_owner(topic)->here);
  std::lock_guard lock(mu_);
  EXPECT_TRUE(unloads_.empty());
}

// The bundle moved and the watch's read of it is slow: the doubt drops
// what is cached, and its own read, finding another owner, closes the
// bundle's topics here (the watch's read alone no longer could: the entry
// that said "this node" is gone).
TEST_F(BundleOwnershipTest, ADoubtedBundleOwnedElsewhereClosesItsTopicsHere) {
  auto topic = *TopicName::parse("persistent://public/default/doubted-moved");
  write(topic, kSelf);
  start();
  ASSERT_EQ(owner(topic), kSelf);
  reads_->hold(true);
  write(topic, 2);
  ownership_->doubt(topic);
  reads_->hold(false);
  ASSERT_TRUE(eventually([&]() {
    std::lock_guard lock(mu_);
    return !unloads_.empty();
  }));
  EXPECT_EQ(owner(topic), 2u);
  std::lock_guard lock(mu_);
  EXPECT_EQ(unloads_, std::vector<std::string>{qualified_bundle(topic)});
}

TEST_F(BundleOwnershipTest, AHandOverSpreadsEveryBundleOverTheOtherLiveBrokers) {
  auto topics = one_topic_per_bundle();
  for (auto& [bundle, topic] : topics) write(topic, kSelf);
  start();
  EXPECT_EQ(ownership_->hand_over(std::chrono::seconds(10)), kBundlesPerNamespace);
  std::map<std::string, int> per_node;
  for (auto& [bundle, topic] : topics) per_node[stored(topic)]++;
  EXPECT_EQ(per_node, (std::map<std::string, int>{{"2", 2}, {"3", 2}}));
  EXPECT_TRUE(ownership_->bundles_of(kSelf).empty());
}

TEST_F(BundleOwnershipTest, AHandOverWithNoOtherLiveBrokerKeepsTheBundles) {
  auto topic = *TopicName::parse("persistent://public/default/alone");
  write(topic, kSelf);
  set_alive(2, false);
  set_alive(3, false);
  start();
  EXPECT_EQ(ownership_->hand_over(std::chrono::seconds(10)), 0u);
  EXPECT_EQ(stored(topic), "1");
}

common::Status split(BundleOwnership& ownership, const std::string& bundle, std::vector<uint32_t> at = {}) {
  std::promise<common::Status> p;
  ownership.split(bundle, std::move(at), false, [&p](common::Status st) { p.set_value(st); });
  return p.get_future().get();
}

TEST_F(BundleOwnershipTest, ASplitKeepsEveryPieceHereWithItsTopicsLoaded) {
  auto topic = *TopicName::parse("persistent://public/default/split-me");
  write(topic, kSelf);
  const std::string old_key = BundleOwnership::bundle_key(topic);
  const std::string old_bundle = qualified_bundle(topic);
  start();
  auto st = split(*ownership_, old_bundle);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  // The topic falls in one half now, owned here; the old bundle is gone.
  EXPECT_NE(qualified_bundle(topic), old_bundle);
  EXPECT_EQ(stored(topic), "1");
  EXPECT_EQ(metadata::blocking::get(*store_, old_key).status().code(), common::ErrorCode::kNotFound);
  EXPECT_EQ(namespace_bundles(topic.ns).size(), kBundlesPerNamespace + 1);
  auto layout = metadata::blocking::get(*store_, layout_key(topic.ns));
  ASSERT_TRUE(layout.is_ok());
  EXPECT_EQ(*decode_boundaries(layout->value), layout_of(topic.ns));
  auto mine = ownership_->bundles_of(kSelf);
  EXPECT_EQ(mine.size(), 2u);
  EXPECT_FALSE(ownership_->releasing(topic));
  std::lock_guard lock(mu_);
  EXPECT_TRUE(unloads_.empty()) << unloads_[0];  // nothing closed: both halves stay here
}

TEST_F(BundleOwnershipTest, ASplitIsRefusedForABundleTheLayoutDoesNotHaveOrADeadOwner) {
  auto topic = *TopicName::parse("persistent://public/default/elsewhere");
  write(topic, 2);
  start();
  ASSERT_TRUE(eventually([&]() { return ownership_->known_owner(topic).has_value(); }));
  EXPECT_EQ(split(*ownership_, "public/default/0x00000000_0x00000010").code(), common::ErrorCode::kNotFound);
  EXPECT_EQ(split(*ownership_, "public/default/0x00000000_0x40000000", {0x50000000}).code(),
            common::ErrorCode::kInvalidArgument);
  set_alive(2, false);
  EXPECT_EQ(split(*ownership_, qualified_bundle(topic)).code(), common::ErrorCode::kUnavailable);
  EXPECT_EQ(stored(topic), "2");
  EXPECT_EQ(namespace_bundles(topic.ns).size(), kBundlesPerNamespace);
}

TEST_F(BundleOwnershipTest, ALookupWhoseLayoutLagsNeverBringsTheOldBundleBack) {
  auto topic = *TopicName::parse("persistent://public/default/lagging");
  const std::string old_key = BundleOwnership::bundle_key(topic);
  auto plan = plan_split(qualified_bundle(topic), {});
  ASSERT_TRUE(plan.is_ok());
  // Another node split it; this one has not heard yet.
  std::promise<common::Status> p;
  commit_split(*store_, topic.ns, plan->low, plan->high, plan->cuts, [&p](common::Status st) { p.set_value(st); });
  ASSERT_TRUE(p.get_future().get().is_ok());
  set_layout("public/default", std::nullopt);
  start();
  EXPECT_NE(owner(topic), 0u);
  EXPECT_EQ(metadata::blocking::get(*store_, old_key).status().code(), common::ErrorCode::kNotFound);
  EXPECT_NE(BundleOwnership::bundle_key(topic), old_key);
  EXPECT_FALSE(stored(topic).empty());
}

TEST(BundleLayoutTest, LayoutsRoundTripAndBadOnesAreRefused) {
  auto b = default_boundaries();
  ASSERT_EQ(b.size(), kBundlesPerNamespace + 1);
  EXPECT_EQ(encode_boundaries(b), "0x00000000,0x40000000,0x80000000,0xc0000000,0xffffffff");
  EXPECT_EQ(*decode_boundaries(encode_boundaries(b)), b);
  for (const char* bad : {"", "0x00000000", "0x00000000,0x00000000,0xffffffff", "0x00000001,0xffffffff",
                          "0x00000000,0xfffffffe", "0,4294967295", "0x00000000,0xzzzzzzzz,0xffffffff"}) {
    EXPECT_FALSE(decode_boundaries(bad).is_ok()) << bad;
  }
  auto range = parse_range("0x40000000_0x80000000");
  ASSERT_TRUE(range.is_ok());
  EXPECT_EQ(range->first, 0x40000000u);
  EXPECT_EQ(range->second, 0x80000000u);
  EXPECT_EQ(range_name(range->first, range->second), "0x40000000_0x80000000");
  for (const char* bad : {"0x80000000_0x40000000", "0x40000000", "x_y", "0x40000000_0x8000000g"}) {
    EXPECT_FALSE(parse_range(bad).is_ok()) << bad;
  }
}

TEST(BundleLayoutTest, SplitCutsHalveOrCutAtPositionsWithinTheLimit) {
  EXPECT_EQ(*split_cuts(0x40000000, 0x80000000, {}, 4), (std::vector<uint32_t>{0x60000000}));
  EXPECT_EQ(*split_cuts(0, 0xffffffff, {0x30, 0x10, 0x30}, 1), (std::vector<uint32_t>{0x10, 0x30}));
  EXPECT_EQ(split_cuts(5, 6, {}, 4).status().code(), common::ErrorCode::kInvalidArgument);
  EXPECT_EQ(split_cuts(0, 100, {100}, 4).status().code(), common::ErrorCode::kInvalidArgument);
  EXPECT_EQ(split_cuts(0, 100, {}, kMaxBundlesPerNamespace).status().code(),
            common::ErrorCode::kFailedPrecondition);
}

TEST(BundleLayoutTest, TopicsFallInTheBundleOfTheirNamespacesLayout) {
  NamespaceName ns{"layout-tenant", "ns"};
  std::vector<TopicName> topics;
  for (int i = 0; i < 200; ++i) {
    topics.push_back(*TopicName::parse("persistent://layout-tenant/ns/t" + std::to_string(i)));
  }
  set_layout(ns.to_string(), Boundaries{0, 0x10000000, 0xffffffff});
  for (const auto& t : topics) {
    const uint32_t h = topic_hash(t);
    EXPECT_EQ(bundle_of(t), h < 0x10000000 ? "0x00000000_0x10000000" : "0x10000000_0xffffffff");
  }
  EXPECT_EQ(namespace_bundles(ns), (std::vector<std::string>{"0x00000000_0x10000000", "0x10000000_0xffffffff"}));
  set_layout(ns.to_string(), std::nullopt);
  EXPECT_EQ(namespace_bundles(ns).size(), kBundlesPerNamespace);
}

}  // namespace
}  // namespace magnetar::broker

namespace magnetar::broker {
namespace {

NodeEndpoints broker_at(uint64_t id, int port) {
  NodeEndpoints n;
  n.node = id;
  n.http_url = "http://10.0.0." + std::to_string(id) + ":" + std::to_string(port);
  return n;
}

TEST(IsolationRulesTest, AnIsolatedNamespaceGoesOnlyToItsPrimariesThenItsSecondaries) {
  IsolationPolicy vip;
  vip.namespaces = {"acme/vip.*"};
  vip.primary = {"10\\.0\\.0\\.1:8080"};
  vip.secondary = {"2"};
  IsolationRules rules({{"vip", vip}});
  std::vector<NodeEndpoints> all{broker_at(1, 8080), broker_at(2, 8080), broker_at(3, 8080)};
  EXPECT_EQ(rules.allowed("acme/vip-orders", all), (std::vector<uint64_t>{1}));
  // No primary alive: the secondary.
  EXPECT_EQ(rules.allowed("acme/vip-orders", {all[1], all[2]}), (std::vector<uint64_t>{2}));
  // Neither: nowhere, rather than on another tenant's broker.
  EXPECT_TRUE(rules.allowed("acme/vip-orders", {all[2]}).empty());
  // Everyone else stays off the reserved broker (secondaries are shared).
  EXPECT_EQ(rules.allowed("acme/plain", all), (std::vector<uint64_t>{2, 3}));
  // ... unless it is the only one alive.
  EXPECT_EQ(rules.allowed("acme/plain", {all[0]}), (std::vector<uint64_t>{1}));
  // The whole name must match.
  EXPECT_EQ(rules.allowed("xacme/vip", all), (std::vector<uint64_t>{2, 3}));
}

TEST(IsolationRulesTest, AMinimumOfPrimariesBringsInTheSecondaries) {
  IsolationPolicy p;
  p.namespaces = {"t/.*"};
  p.primary = {"1", "2"};
  p.secondary = {"3"};
  p.min_limit = 2;
  IsolationRules rules({{"p", p}});
  std::vector<NodeEndpoints> all{broker_at(1, 1), broker_at(2, 1), broker_at(3, 1)};
  EXPECT_EQ(rules.allowed("t/a", all), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(rules.allowed("t/a", {all[0], all[2]}), (std::vector<uint64_t>{1, 3}));
}

TEST(IsolationRulesTest, PoliciesRoundTripAndBadOnesAreRefused) {
  IsolationPolicy p;
  p.namespaces = {"a/.*", "b/c"};
  p.primary = {"host-[0-9]+"};
  p.secondary = {"7"};
  p.min_limit = 3;
  auto back = decode_isolation(encode_isolation(p));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back->namespaces, p.namespaces);
  EXPECT_EQ(back->primary, p.primary);
  EXPECT_EQ(back->secondary, p.secondary);
  EXPECT_EQ(back->min_limit, 3u);
  EXPECT_TRUE(validate_isolation(p).is_ok());
  IsolationPolicy bad = p;
  bad.primary = {"(unclosed"};
  EXPECT_EQ(validate_isolation(bad).code(), common::ErrorCode::kInvalidArgument);
  bad = p;
  bad.namespaces = {"a\nprimary .*"};
  EXPECT_EQ(validate_isolation(bad).code(), common::ErrorCode::kInvalidArgument);
  bad = p;
  bad.primary.clear();
  EXPECT_EQ(validate_isolation(bad).code(), common::ErrorCode::kInvalidArgument);
  EXPECT_FALSE(decode_isolation("garbage").is_ok());
}

}  // namespace
}  // namespace magnetar::broker
