// A real broker for unit tests: BrokerService on its own runtime, local
// storage and a LevelDB metadata store in a temporary directory, with helpers
// that run an operation on a topic's home reactor and wait (bounded) for its
// answer, and a ConsumerSink that records what it is given.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "broker/broker_service.h"
#include "metadata/leveldb_store.h"

namespace magnetar::broker {

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

class BrokerFixture : public ::testing::Test {
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
    if (wrap_storage_) storage_ = wrap_storage_(std::move(storage_));
    ASSERT_TRUE(storage_->start().is_ok());
    store_ = std::make_unique<metadata::LevelDbStore>(metadata::LevelDbStore::Options{dir_ + "/metadata"});
    ASSERT_TRUE(store_->start().is_ok());
    runtime_ = std::make_unique<runtime::Runtime>(2, mailbox_capacity_);
    runtime_->start();
    broker_ = std::make_unique<BrokerService>(*runtime_, *storage_, *store_, broker_options_);
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

  std::vector<std::unique_ptr<RecordingSink>> sinks_;
  std::string dir_;
  size_t mailbox_capacity_ = runtime::Reactor::kDefaultMailboxCapacity;  // set before SetUp()
  BrokerOptions broker_options_;                                          // set before SetUp()
  // Set before SetUp(): wraps the node's storage (to inject its failures).
  std::function<std::unique_ptr<storage::Storage>(std::unique_ptr<storage::Storage>)> wrap_storage_;
  std::unique_ptr<storage::Storage> storage_;
  std::unique_ptr<metadata::LevelDbStore> store_;
  std::unique_ptr<runtime::Runtime> runtime_;
  std::unique_ptr<BrokerService> broker_;
};

}  // namespace magnetar::broker
