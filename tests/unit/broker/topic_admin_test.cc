// What administrators do to topics through BrokerService and Topic, on real
// storage and a real metadata store: create and delete topics, create,
// reset and remove subscriptions, unload, rates and collected stats.
#include "broker/broker_service.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <condition_variable>
#include <algorithm>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "metadata/leveldb_store.h"

namespace magnetar::broker {
namespace {

using common::Result;
using common::Slice;
using common::Status;
using ledger::Position;

constexpr auto kWait = std::chrono::seconds(30);

// Collects what the broker hands a consumer; waits are bounded.
class RecordingSink final : public ConsumerSink {
 public:
  void deliver(std::vector<Delivery> entries) override {
    std::lock_guard lock(mu_);
    for (auto& d : entries) got_.push_back(std::move(d));
    cv_.notify_all();
  }
  void closed(const Status& why) override {
    std::lock_guard lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }
  void active_changed(bool active) override {
    std::lock_guard lock(mu_);
    active_ = active;
    cv_.notify_all();
  }
  // Waits until at least n deliveries arrived; returns them all.
  std::vector<Delivery> wait_for(size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, kWait, [&] { return got_.size() >= n; });
    return got_;
  }
  // Waits a little and returns how many arrived (for "nothing more came").
  size_t settle_count() {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::lock_guard lock(mu_);
    return got_.size();
  }
  bool wait_closed() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return closed_; });
  }
  bool active() {
    std::lock_guard lock(mu_);
    return active_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Delivery> got_;
  bool closed_ = false;
  bool active_ = false;
};

class TopicAdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "magnetar-broker-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    open_node();
  }
  void TearDown() override {
    close_node();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void open_node() {
    storage::StorageOptions so;
    so.directory = dir_ + "/storage";
    so.max_batch_delay = std::chrono::microseconds(0);
    storage_ = storage::make_local_storage(so);
    ASSERT_TRUE(storage_->start().is_ok());
    store_ = std::make_unique<metadata::LevelDbStore>(metadata::LevelDbStore::Options{dir_ + "/metadata"});
    ASSERT_TRUE(store_->start().is_ok());
    runtime_ = std::make_unique<runtime::Runtime>(2);
    runtime_->start();
    broker_ = std::make_unique<BrokerService>(*runtime_, *storage_, *store_);
    ASSERT_TRUE(broker_->start().is_ok());
  }
  void close_node() {
    broker_->stop();
    runtime_->stop();
    store_->stop();
    storage_->stop();
  }

  // Runs `fn(topic)` on the topic's home reactor and waits for its report.
  template <typename T>
  T on_topic(const std::string& name, std::function<void(Topic&, ledger::Callback<T>)> fn) {
    auto topic = TopicName::parse(name);
    EXPECT_TRUE(topic.is_ok());
    auto p = std::make_shared<std::promise<T>>();
    auto f = p->get_future();
    broker_->with_topic(*topic, [fn, p](Result<Topic*> t) {
      if (!t.is_ok()) {
        ADD_FAILURE() << t.status().to_string();
        std::abort();
      }
      fn(**t, [p](T v) { p->set_value(std::move(v)); });
    });
    if (f.wait_for(kWait) != std::future_status::ready) {
      ADD_FAILURE() << "topic call did not complete";
      std::abort();
    }
    return f.get();
  }
  Status add_producer(const std::string& topic, uint64_t id, const std::string& name) {
    return on_topic<Status>(topic, [id, name](Topic& t, auto done) { done(t.add_producer(id, name)); });
  }
  std::vector<Position> publish(const std::string& topic, uint64_t producer, int n, const std::string& prefix = "m") {
    std::vector<Position> out;
    for (int i = 0; i < n; ++i) {
      auto r = on_topic<Result<Position>>(topic, [&](Topic& t, auto done) {
        ledger::MessageHeader h;
        h.sequence_id = i;
        t.publish(producer, h, Slice::copy_of(prefix + std::to_string(i)), done);
      });
      EXPECT_TRUE(r.is_ok()) << r.status().to_string();
      if (r.is_ok()) out.push_back(*r);
    }
    return out;
  }
  Status subscribe(const std::string& topic, uint64_t consumer, ConsumerOptions opts, ConsumerSink* sink) {
    auto r = on_topic<Result<Subscription*>>(topic, [consumer, opts, sink](Topic& t, auto done) {
      t.subscribe(consumer, opts, sink, done);
    });
    return r.is_ok() ? Status::ok() : r.status();
  }
  void flow(const std::string& topic, const std::string& sub, uint64_t consumer, uint32_t n) {
    on_topic<bool>(topic, [&](Topic& t, auto done) {
      t.subscription(sub)->flow(consumer, n);
      done(true);
    });
  }
  Status ack(const std::string& topic, const std::string& sub, uint64_t consumer, Position p, bool cumulative = false) {
    return on_topic<Status>(topic, [&](Topic& t, auto done) {
      auto* s = t.subscription(sub);
      done(cumulative ? s->ack_cumulative(consumer, p) : s->ack(consumer, p));
    });
  }
  TopicStats stats(const std::string& topic) {
    return on_topic<TopicStats>(topic, [](Topic& t, auto done) { done(t.stats()); });
  }
  static ConsumerOptions options(const std::string& sub, SubscriptionType type,
                                 InitialPosition pos = InitialPosition::kEarliest) {
    ConsumerOptions o;
    o.subscription = sub;
    o.type = type;
    o.initial_position = pos;
    o.consumer_name = "c";
    return o;
  }

  // Sinks outlive the broker: it tells them when it closes their consumers.
  RecordingSink& new_sink() {
    sinks_.push_back(std::make_unique<RecordingSink>());
    return *sinks_.back();
  }

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

  std::vector<std::unique_ptr<RecordingSink>> sinks_;
  std::string dir_;
  std::unique_ptr<storage::Storage> storage_;
  std::unique_ptr<metadata::LevelDbStore> store_;
  std::unique_ptr<runtime::Runtime> runtime_;
  std::unique_ptr<BrokerService> broker_;
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

}  // namespace
}  // namespace magnetar::broker
