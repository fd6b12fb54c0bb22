// What administrators do to topics through BrokerService and Topic, on real
// storage and a real metadata store: create and delete topics, create,
// reset and remove subscriptions, unload, rates and collected stats.
#include "utils/broker_fixture.h"

#include <algorithm>
#include <atomic>

namespace magnetar::broker {
namespace {

using common::Result;
using common::Slice;
using common::Status;
using ledger::Position;

class TopicAdminTest : public BrokerFixture {
 protected:
  // Runs a BrokerService operation that reports a Status and waits for it.
  Status broker_call(std::function<void(ledger::Callback<Status>)> op) {
    auto p = std::make_shared<std::promise<Status>>();
    auto f = p->get_future();
    op([p](Status st) { p->set_value(st); });
    if (f.wait_for(kWait) != std::future_status::ready) {
      ADD_FAILURE() << "broker call did not complete";
      std::abort();
    }
    return f.get();
  }
  Status create_topic(const std::string& name) {
    auto t = *TopicName::parse(name);
    return broker_call([&](auto done) { broker_->create_topic(t, done); });
  }
  Status delete_topic(const std::string& name, bool force) {
    auto t = *TopicName::parse(name);
    return broker_call([&](auto done) { broker_->delete_topic(t, force, done); });
  }
  void restart() {
    close_node();
    open_node();
  }
};

const std::string kTopic = "persistent://public/default/admin-orders";

TEST_F(TopicAdminTest, CreatedSubscriptionSurvivesARestartWithItsBacklog) {
  ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());
  publish(kTopic, 1, 3);
  auto created = on_topic<Result<Subscription*>>(kTopic, [](Topic& t, auto done) {
    t.create_subscription("audit", InitialPosition::kEarliest, done);
  });
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  auto again = on_topic<Result<Subscription*>>(kTopic, [](Topic& t, auto done) {
    t.create_subscription("audit", InitialPosition::kEarliest, done);
  });
  EXPECT_EQ(again.status().code(), common::ErrorCode::kAlreadyExists);
  auto s = stats(kTopic);
  ASSERT_EQ(s.subscriptions.size(), 1u);
  EXPECT_EQ(s.subscriptions[0].backlog_messages, 3u);
  EXPECT_FALSE(s.subscriptions[0].typed);  // no consumer has said which type yet

  restart();
  s = stats(kTopic);
  ASSERT_EQ(s.subscriptions.size(), 1u);
  EXPECT_EQ(s.subscriptions[0].name, "audit");
  EXPECT_EQ(s.subscriptions[0].backlog_messages, 3u);
  // The first consumer gives it a type.
  RecordingSink& sink = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 5, options("audit", SubscriptionType::kShared), &sink).is_ok());
  s = stats(kTopic);
  EXPECT_TRUE(s.subscriptions[0].typed);
  EXPECT_EQ(s.subscriptions[0].type, SubscriptionType::kShared);
  flow(kTopic, "audit", 5, 10);
  EXPECT_EQ(sink.wait_for(3).size(), 3u);
}

TEST_F(TopicAdminTest, ResetSubscriptionRedeliversAndIsPersisted) {
  ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());
  auto pos = publish(kTopic, 1, 4);
  RecordingSink& first = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 7, options("sub", SubscriptionType::kExclusive), &first).is_ok());
  flow(kTopic, "sub", 7, 10);
  ASSERT_EQ(first.wait_for(4).size(), 4u);
  ASSERT_TRUE(ack(kTopic, "sub", 7, pos[3], true).is_ok());
  EXPECT_EQ(stats(kTopic).subscriptions[0].backlog_messages, 0u);

  // Back to just after the first message: three to read again.
  auto st = on_topic<Status>(kTopic, [&](Topic& t, auto done) { t.reset_subscription("sub", pos[0], done); });
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_TRUE(first.wait_closed());  // consumers are detached, as Pulsar does
  EXPECT_EQ(stats(kTopic).subscriptions[0].backlog_messages, 3u);
  RecordingSink& second = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 8, options("sub", SubscriptionType::kExclusive), &second).is_ok());
  flow(kTopic, "sub", 8, 10);
  auto got = second.wait_for(3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].position, pos[1]);
  EXPECT_EQ(on_topic<Status>(kTopic, [&](Topic& t, auto done) { t.reset_subscription("nope", pos[0], done); }).code(),
            common::ErrorCode::kNotFound);

  restart();
  EXPECT_EQ(stats(kTopic).subscriptions[0].backlog_messages, 3u);
}

TEST_F(TopicAdminTest, RemovingASubscriptionWithConsumersNeedsForce) {
  RecordingSink& sink = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 7, options("busy", SubscriptionType::kShared), &sink).is_ok());
  auto refused = on_topic<Status>(kTopic, [](Topic& t, auto done) { t.remove_subscription("busy", false, done); });
  EXPECT_EQ(refused.code(), common::ErrorCode::kFailedPrecondition);
  auto forced = on_topic<Status>(kTopic, [](Topic& t, auto done) { t.remove_subscription("busy", true, done); });
  EXPECT_TRUE(forced.is_ok()) << forced.to_string();
  EXPECT_TRUE(sink.wait_closed());
  EXPECT_EQ(on_topic<Status>(kTopic, [](Topic& t, auto done) { t.remove_subscription("busy", true, done); }).code(),
            common::ErrorCode::kNotFound);
  restart();
  EXPECT_TRUE(stats(kTopic).subscriptions.empty());
}

TEST_F(TopicAdminTest, CreateAndDeleteTopics) {
  const std::string name = "persistent://public/default/admin-created";
  ASSERT_TRUE(create_topic(name).is_ok());
  EXPECT_EQ(create_topic(name).code(), common::ErrorCode::kAlreadyExists);
  ASSERT_TRUE(add_producer(name, 1, "p").is_ok());
  publish(name, 1, 2);
  ASSERT_TRUE((on_topic<Result<Subscription*>>(name, [](Topic& t, auto done) {
                t.create_subscription("s", InitialPosition::kEarliest, done);
              }).is_ok()));
  EXPECT_EQ(delete_topic(name, false).code(), common::ErrorCode::kFailedPrecondition);  // a producer
  ASSERT_TRUE(delete_topic(name, true).is_ok());
  EXPECT_EQ(delete_topic(name, true).code(), common::ErrorCode::kNotFound);
  auto loaded = broker_->loaded_topic_names();
  EXPECT_EQ(std::count(loaded.begin(), loaded.end(), name), 0);

  // Known nowhere any more: created again, it is empty and has no subscription.
  restart();
  ASSERT_TRUE(create_topic(name).is_ok());
  auto s = stats(name);
  EXPECT_EQ(s.entries, 0u);
  EXPECT_TRUE(s.subscriptions.empty());

  // A persisted topic that is not loaded still exists.
  restart();
  EXPECT_EQ(create_topic(name).code(), common::ErrorCode::kAlreadyExists);
}

TEST_F(TopicAdminTest, NonPersistentTopicsExistWhileLoaded) {
  const std::string name = "non-persistent://public/default/admin-np";
  ASSERT_TRUE(create_topic(name).is_ok());
  EXPECT_EQ(create_topic(name).code(), common::ErrorCode::kAlreadyExists);
  ASSERT_TRUE(delete_topic(name, false).is_ok());
  ASSERT_TRUE(create_topic(name).is_ok());
}

TEST_F(TopicAdminTest, WithExistingTopicNeverCreates) {
  auto t = *TopicName::parse("persistent://public/default/admin-absent");
  auto p = std::make_shared<std::promise<Status>>();
  broker_->with_existing_topic(t, false, [p](Result<Topic*> r) { p->set_value(r.status()); });
  auto f = p->get_future();
  ASSERT_EQ(f.wait_for(kWait), std::future_status::ready);
  EXPECT_EQ(f.get().code(), common::ErrorCode::kNotFound);
  EXPECT_TRUE(broker_->loaded_topic_names().empty());
}

TEST_F(TopicAdminTest, UnloadForgetsTheTopicUntilItsNextUse) {
  ASSERT_TRUE((on_topic<Result<Subscription*>>(kTopic, [](Topic& t, auto done) {
                t.create_subscription("s", InitialPosition::kLatest, done);
              }).is_ok()));
  auto t = *TopicName::parse(kTopic);
  ASSERT_TRUE(broker_call([&](auto done) { broker_->unload_topic(t, done); }).is_ok());
  EXPECT_TRUE(broker_->loaded_topic_names().empty());
  EXPECT_TRUE(broker_call([&](auto done) { broker_->unload_topic(t, done); }).is_ok());  // not loaded: fine
  EXPECT_EQ(stats(kTopic).subscriptions.size(), 1u);  // loaded again, with its subscription
}

TEST_F(TopicAdminTest, CollectedStatsCoverEveryReactorsTopics) {
  ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());
  publish(kTopic, 1, 3);
  ASSERT_TRUE(create_topic("persistent://public/default/admin-other").is_ok());
  auto p = std::make_shared<std::promise<std::vector<BrokerService::TopicSample>>>();
  auto f = p->get_future();
  broker_->collect_stats([p](std::vector<BrokerService::TopicSample> all) { p->set_value(std::move(all)); });
  ASSERT_EQ(f.wait_for(kWait), std::future_status::ready);
  auto all = f.get();
  ASSERT_EQ(all.size(), 2u);
  for (const auto& s : all) {
    if (s.name.to_string() == kTopic) {
      EXPECT_EQ(s.stats.messages_in, 3u);
      EXPECT_EQ(s.stats.publishers.size(), 1u);
    } else {
      EXPECT_EQ(s.stats.messages_in, 0u);
    }
  }
}

TEST(RateMeterTest, RatesAreDeltasOverTheWindow) {
  RateMeter m;
  auto t0 = RateMeter::Clock::time_point{} + std::chrono::seconds(100);
  auto r = m.update(10, 1000, t0);
  EXPECT_EQ(r.messages, 0);  // the first sample has nothing to compare with
  r = m.update(20, 2000, t0 + std::chrono::milliseconds(500));
  EXPECT_EQ(r.messages, 0);  // inside the window: the last rates, no new sample
  r = m.update(30, 5000, t0 + std::chrono::seconds(2));
  EXPECT_DOUBLE_EQ(r.messages, 10);
  EXPECT_DOUBLE_EQ(r.bytes, 2000);
  r = m.update(30, 5000, t0 + std::chrono::seconds(4));
  EXPECT_DOUBLE_EQ(r.messages, 0);
  r = m.update(5, 10, t0 + std::chrono::seconds(6));  // counters reset: no negative rates
  EXPECT_DOUBLE_EQ(r.messages, 0);
  EXPECT_DOUBLE_EQ(r.bytes, 0);
}

// A storage whose next `refusals` ledger creations lose a compare-and-set,
// as a replicated ledger's record does when another member changed it.
class ConflictingStorage final : public storage::Storage {
 public:
  explicit ConflictingStorage(std::unique_ptr<storage::Storage> real) : real_(std::move(real)) {}
  std::atomic<int> refusals{0};

  std::string_view name() const override { return real_->name(); }
  Status start() override { return real_->start(); }
  void stop() override { real_->stop(); }
  void create_ledger(storage::LedgerId id, storage::Callback<Result<storage::LedgerWriter>> done) override {
    if (refusals.fetch_sub(1) > 0) {
      runtime::Reactor* home = runtime::Reactor::current();
      auto refuse = [done]() { done(Status::failed_precondition("'/storage/ledgers/9' is at version 2, not 1")); };
      if (home == nullptr || !home->post_reliably(refuse)) refuse();
      return;
    }
    real_->create_ledger(id, std::move(done));
  }
  void open_ledger(storage::LedgerId id, storage::Callback<Result<storage::LedgerWriter>> done) override {
    real_->open_ledger(id, std::move(done));
  }
  void add_entry(const storage::LedgerWriter& w, storage::EntryId e, Slice data,
                 storage::Callback<Status> done) override {
    real_->add_entry(w, e, std::move(data), std::move(done));
  }
  Status set_fsync(storage::LedgerId id, std::optional<storage::FsyncMode> mode,
                   std::chrono::milliseconds interval) override {
    return real_->set_fsync(id, mode, interval);
  }
  void close_ledger(storage::LedgerId id, storage::Callback<Result<storage::EntryId>> done) override {
    real_->close_ledger(id, std::move(done));
  }
  void read_entries(storage::LedgerId id, storage::EntryId first, storage::EntryId last,
                    storage::Callback<Result<std::vector<storage::Entry>>> done) override {
    real_->read_entries(id, first, last, std::move(done));
  }
  void delete_ledger(storage::LedgerId id, storage::Callback<Status> done) override {
    real_->delete_ledger(id, std::move(done));
  }
  Result<storage::LedgerInfo> ledger_info(storage::LedgerId id) const override { return real_->ledger_info(id); }
  std::vector<storage::LedgerId> list_ledgers() const override { return real_->list_ledgers(); }

 private:
  std::unique_ptr<storage::Storage> real_;
};

class TopicLoadTest : public BrokerFixture {
 protected:
  void SetUp() override {
    wrap_storage_ = [this](std::unique_ptr<storage::Storage> real) {
      auto wrapped = std::make_unique<ConflictingStorage>(std::move(real));
      conflicting_ = wrapped.get();
      return std::unique_ptr<storage::Storage>(std::move(wrapped));
    };
    BrokerFixture::SetUp();
  }
  Status load(const std::string& name) {
    auto p = std::make_shared<std::promise<Status>>();
    auto f = p->get_future();
    broker_->with_topic(*TopicName::parse(name), [p](Result<Topic*> t) { p->set_value(t.status()); });
    if (f.wait_for(kWait) != std::future_status::ready) {
      ADD_FAILURE() << "loading the topic did not complete";
      std::abort();
    }
    return f.get();
  }
  ConflictingStorage* conflicting_ = nullptr;
};

// Clients retry a topic that is not ready; a lost compare-and-set while it
// loads is that, not a refusal (Kafka clients give up on POLICY_VIOLATION).
TEST_F(TopicLoadTest, ACompareAndSetLostWhileLoadingIsUnavailableAndPasses) {
  conflicting_->refusals = 1;
  Status first = load("persistent://public/default/contended");
  EXPECT_EQ(first.code(), common::ErrorCode::kUnavailable) << first.to_string();
  EXPECT_NE(first.message().find("try again"), std::string::npos) << first.to_string();
  EXPECT_TRUE(load("persistent://public/default/contended").is_ok());
}

// A cluster's ownership whose bundle goes to another node once the topic
// started loading here (as a membership change moves it mid-open).
class MovingOwnership final : public Ownership {
 public:
  void owner_of(const TopicName& topic, OwnerCallback done) override { done(*known_owner(topic)); }
  std::optional<NodeEndpoints> known_owner(const TopicName&) const override {
    NodeEndpoints owner;
    owner.node = asked_++ == 0 ? 1 : 2;
    owner.here = owner.node == 1;
    return owner;
  }
  std::vector<NodeEndpoints> live_nodes() const override { return {}; }
  NodeEndpoints self() const override {
    NodeEndpoints me;
    me.node = 1;
    return me;
  }
  std::vector<std::string> bundles_of(uint64_t) const override { return {}; }
  bool releasing(const TopicName&) const override { return false; }
  void unload(const std::string&, uint64_t, std::function<void(Status)> done) override { done(Status::ok()); }
  std::vector<BundleOwner> bundles_in(const NamespaceName&) const override { return {}; }
  void split(const std::string&, std::vector<uint32_t>, bool, std::function<void(Status)> done) override {
    done(Status::ok());
  }
  mutable std::atomic<int> asked_{0};
};

// The topics closed when a bundle moves are those loaded then: one still
// opening its log must not be served here once it has opened.
TEST_F(TopicLoadTest, ATopicWhoseBundleMovedWhileItOpenedIsNotServed) {
  MovingOwnership ownership;
  broker_->set_ownership(&ownership);
  Status st = load("persistent://public/default/moved");
  broker_->set_ownership(nullptr);
  EXPECT_EQ(st.code(), common::ErrorCode::kWrongNode) << st.to_string();
  EXPECT_NE(st.message().find("served by node 2"), std::string::npos) << st.to_string();
  EXPECT_GE(ownership.asked_.load(), 2);
}

}  // namespace
}  // namespace magnetar::broker
