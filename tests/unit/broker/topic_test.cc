// Topics, producers and subscriptions on real storage and a real metadata
// store, driven on their home reactors through BrokerService.
#include "broker/tenancy.h"
#include "common/metrics.h"
#include "ledger/ledger_ids.h"
#include "ledger/managed_ledger.h"
#include "utils/broker_fixture.h"

namespace magnetar::broker {
namespace {

using common::Result;
using common::Slice;
using common::Status;
using ledger::Position;

class TopicTest : public BrokerFixture {
 protected:
  // A reader's options (a non-durable subscription, ConsumerOptions::start_after).
  static ConsumerOptions reader(const std::string& sub, std::optional<Position> start_after,
                                InitialPosition initial = InitialPosition::kLatest) {
    ConsumerOptions o = options(sub, SubscriptionType::kExclusive, initial);
    o.durable = false;
    o.start_after = start_after;
    return o;
  }
};

const std::string kTopic = "persistent://public/default/orders";

TEST_F(TopicTest, ExclusiveConsumerGetsEverythingInOrderWithinItsPermits) {
  ASSERT_TRUE(add_producer(kTopic, 1, "producer-a").is_ok());
  publish(kTopic, 1, 10);
  RecordingSink& sink = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 7, options("sub", SubscriptionType::kExclusive), &sink).is_ok());
  EXPECT_EQ(sink.settle_count(), 0u);  // no permits yet
  flow(kTopic, "sub", 7, 4);
  auto got = sink.wait_for(4);
  EXPECT_EQ(sink.settle_count(), 4u);  // exactly the permits
  flow(kTopic, "sub", 7, 100);
  got = sink.wait_for(10);
  ASSERT_EQ(got.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(got[i].payload.view(), "m" + std::to_string(i));
    EXPECT_EQ(got[i].header.producer, "producer-a");
    EXPECT_EQ(got[i].header.first_index, i);
    if (i > 0) {
      EXPECT_LT(got[i - 1].position, got[i].position);
    }
  }
  // Live tail: new messages flow straight to the waiting consumer.
  publish(kTopic, 1, 3, "live");
  got = sink.wait_for(13);
  ASSERT_EQ(got.size(), 13u);
  EXPECT_EQ(got[12].payload.view(), "live2");
}

TEST_F(TopicTest, SecondExclusiveConsumerIsRefusedAndTypesMustMatch) {
  RecordingSink& a = new_sink();
  RecordingSink& b = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, options("sub", SubscriptionType::kExclusive), &a).is_ok());
  Status busy = subscribe(kTopic, 2, options("sub", SubscriptionType::kExclusive), &b);
  EXPECT_EQ(busy.code(), common::ErrorCode::kFailedPrecondition);
  Status wrong = subscribe(kTopic, 3, options("sub", SubscriptionType::kShared), &b);
  EXPECT_EQ(wrong.code(), common::ErrorCode::kInvalidArgument);
  Status other_sub = subscribe(kTopic, 4, options("sub2", SubscriptionType::kExclusive), &b);
  EXPECT_TRUE(other_sub.is_ok());
}

TEST_F(TopicTest, ProducerNamesAreUniquePerTopic) {
  ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());
  EXPECT_EQ(add_producer(kTopic, 2, "p").code(), common::ErrorCode::kAlreadyExists);
  EXPECT_TRUE(add_producer(kTopic, 3, "q").is_ok());
  auto unknown = on_topic<Result<Position>>(kTopic, [](Topic& t, auto done) {
    t.publish(99, {}, Slice::copy_of("x"), done);
  });
  EXPECT_EQ(unknown.status().code(), common::ErrorCode::kNotFound);
}

TEST_F(TopicTest, SharedSubscriptionSpreadsAndRedeliversWhatALeavingConsumerHeld) {
  ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());
  publish(kTopic, 1, 20);
  RecordingSink& a = new_sink();
  RecordingSink& b = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, options("work", SubscriptionType::kShared), &a).is_ok());
  ASSERT_TRUE(subscribe(kTopic, 2, options("work", SubscriptionType::kShared), &b).is_ok());
  flow(kTopic, "work", 1, 5);
  flow(kTopic, "work", 2, 5);
  auto got_a = a.wait_for(5);
  auto got_b = b.wait_for(5);
  ASSERT_EQ(got_a.size(), 5u);
  ASSERT_EQ(got_b.size(), 5u);
  std::set<std::string> seen;
  for (auto& d : got_a) seen.insert(d.payload.to_string());
  for (auto& d : got_b) seen.insert(d.payload.to_string());
  EXPECT_EQ(seen.size(), 10u);  // no entry went to both

  // a acknowledges two, then leaves: its other three go to b.
  EXPECT_TRUE(ack(kTopic, "work", 1, got_a[0].position).is_ok());
  EXPECT_TRUE(ack(kTopic, "work", 1, got_a[1].position).is_ok());
  on_topic<bool>(kTopic, [](Topic& t, auto done) {
    t.subscription("work")->remove_consumer(1);
    done(true);
  });
  flow(kTopic, "work", 2, 100);
  auto all_b = b.wait_for(5 + 3 + 10);
  ASSERT_EQ(all_b.size(), 18u);
  std::set<std::string> b_payloads;
  int redelivered = 0;
  for (auto& d : all_b) {
    b_payloads.insert(d.payload.to_string());
    if (d.redelivery_count > 0) ++redelivered;
  }
  EXPECT_EQ(redelivered, 3);
  for (int i = 2; i < 5; ++i) EXPECT_TRUE(b_payloads.count(got_a[i].payload.to_string()));
  EXPECT_FALSE(b_payloads.count(got_a[0].payload.to_string()));
  EXPECT_EQ(ack(kTopic, "work", 2, all_b[0].position, /*cumulative=*/true).code(),
            common::ErrorCode::kInvalidArgument);
}

TEST_F(TopicTest, FailoverSendsToTheLowestPriorityAndSwitchesOver) {
  ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());
  publish(kTopic, 1, 6);
  RecordingSink& standby = new_sink();
  RecordingSink& primary = new_sink();
  auto o1 = options("fo", SubscriptionType::kFailover);
  o1.priority = 5;
  auto o2 = options("fo", SubscriptionType::kFailover);
  o2.priority = 1;
  ASSERT_TRUE(subscribe(kTopic, 1, o1, &standby).is_ok());
  ASSERT_TRUE(subscribe(kTopic, 2, o2, &primary).is_ok());
  EXPECT_TRUE(primary.active());
  EXPECT_FALSE(standby.active());
  flow(kTopic, "fo", 1, 100);
  flow(kTopic, "fo", 2, 100);
  auto got = primary.wait_for(6);
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(standby.settle_count(), 0u);
  EXPECT_TRUE(ack(kTopic, "fo", 2, got[2].position, /*cumulative=*/true).is_ok());
  on_topic<bool>(kTopic, [](Topic& t, auto done) {
    t.subscription("fo")->remove_consumer(2);
    done(true);
  });
  // The standby takes over with what the primary had not acknowledged.
  auto taken = standby.wait_for(3);
  ASSERT_EQ(taken.size(), 3u);
  EXPECT_TRUE(standby.active());
  EXPECT_EQ(taken[0].payload.view(), "m3");
  EXPECT_EQ(taken[2].payload.view(), "m5");
}

TEST_F(TopicTest, AcknowledgedProgressAndBacklogSurviveARestart) {
  ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());
  auto positions = publish(kTopic, 1, 10);
  RecordingSink& sink = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, options("durable", SubscriptionType::kExclusive), &sink).is_ok());
  flow(kTopic, "durable", 1, 100);
  ASSERT_EQ(sink.wait_for(10).size(), 10u);
  EXPECT_TRUE(ack(kTopic, "durable", 1, positions[5], /*cumulative=*/true).is_ok());
  EXPECT_TRUE(ack(kTopic, "durable", 1, positions[8]).is_ok());
  auto s = stats(kTopic);
  ASSERT_EQ(s.subscriptions.size(), 1u);
  EXPECT_EQ(s.subscriptions[0].backlog_messages, 3u);  // 6, 7 and 9
  EXPECT_EQ(s.messages_in, 10u);
  EXPECT_EQ(s.messages_out, 10u);

  close_node();
  open_node();

  RecordingSink& again = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, options("durable", SubscriptionType::kExclusive), &again).is_ok());
  flow(kTopic, "durable", 1, 100);
  auto got = again.wait_for(3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].payload.view(), "m6");
  EXPECT_EQ(got[1].payload.view(), "m7");
  EXPECT_EQ(got[2].payload.view(), "m9");
  EXPECT_EQ(again.settle_count(), 3u);
}

TEST_F(TopicTest, ReplicatorCursorsAreNoSubscriptionsAndTheirNamesAreReserved) {
  ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());
  publish(kTopic, 1, 3);
  RecordingSink& sink = new_sink();
  Status refused = subscribe(kTopic, 1, options("pulsar.repl.west", SubscriptionType::kExclusive), &sink);
  EXPECT_EQ(refused.code(), common::ErrorCode::kInvalidArgument);
  // A replicator's durable cursor, as geo-replication opens it.
  auto opened = on_topic<Status>(kTopic, [](Topic& t, auto done) {
    t.log().open_cursor("pulsar.repl.west", true, ledger::Log::CursorStart::kEarliest,
                        [done](Result<ledger::Cursor*> c) { done(c.status()); });
  });
  ASSERT_TRUE(opened.is_ok());
  close_node();
  open_node();
  auto names = on_topic<std::vector<std::string>>(kTopic, [](Topic& t, auto done) {
    done(t.subscription_names());
  });
  EXPECT_TRUE(names.empty());
  auto cursors = on_topic<std::vector<std::string>>(kTopic, [](Topic& t, auto done) {
    done(t.log().cursor_names());
  });
  EXPECT_EQ(cursors, std::vector<std::string>{"pulsar.repl.west"});  // recovered, kept
  EXPECT_TRUE(stats(kTopic).subscriptions.empty());
}

TEST_F(TopicTest, LatestSubscriptionStartsAtTheEnd) {
  ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());
  publish(kTopic, 1, 5, "old");
  RecordingSink& sink = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, options("late", SubscriptionType::kExclusive, InitialPosition::kLatest), &sink).is_ok());
  flow(kTopic, "late", 1, 100);
  publish(kTopic, 1, 2, "new");
  auto got = sink.wait_for(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].payload.view(), "new0");
  EXPECT_EQ(sink.settle_count(), 2u);
}

TEST_F(TopicTest, AReaderStartsAfterItsStartPositionClampedToTheLog) {
  ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());
  auto at = publish(kTopic, 1, 5);
  ASSERT_EQ(at.size(), 5u);
  struct Case {
    std::string name;
    std::optional<Position> start_after;
    InitialPosition initial;
    std::vector<std::string> expect;
  };
  const Position before_all{0, storage::kNoEntry};
  const Position past_end{at.back().ledger, at.back().entry + 10};
  for (const Case& c : std::vector<Case>{
           {"after-m1", at[1], InitialPosition::kLatest, {"m2", "m3", "m4"}},
           {"before-all", before_all, InitialPosition::kLatest, {"m0", "m1", "m2", "m3", "m4"}},
           {"past-end-earliest", past_end, InitialPosition::kEarliest, {"m0", "m1", "m2", "m3", "m4"}},
           {"after-last", at.back(), InitialPosition::kEarliest, {}},
       }) {
    RecordingSink& sink = new_sink();
    ASSERT_TRUE(subscribe(kTopic, 10, reader(c.name, c.start_after, c.initial), &sink).is_ok()) << c.name;
    flow(kTopic, c.name, 10, 100);
    auto got = sink.wait_for(c.expect.size());
    std::vector<std::string> payloads;
    for (const auto& d : got) payloads.push_back(std::string(d.payload.view()));
    EXPECT_EQ(payloads, c.expect) << c.name;
  }
}

TEST_F(TopicTest, AReaderSubscriptionGoesWithItsLastConsumer) {
  RecordingSink& a = new_sink();
  RecordingSink& b = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, reader("r", std::nullopt), &a).is_ok());
  EXPECT_EQ(subscribe(kTopic, 2, options("r", SubscriptionType::kExclusive), &b).code(),
            common::ErrorCode::kInvalidArgument);  // a durable subscription never takes a reader's name
  auto left = [&](uint64_t consumer) {
    return on_topic<std::vector<std::string>>(kTopic, [consumer](Topic& t, auto done) {
      t.remove_consumer("r", consumer);
      done(t.subscription_names());
    });
  };
  EXPECT_TRUE(left(1).empty());
  ASSERT_TRUE(subscribe(kTopic, 3, options("d", SubscriptionType::kShared), &b).is_ok());
  on_topic<bool>(kTopic, [](Topic& t, auto done) {
    t.remove_consumer("d", 3);
    done(true);
  });
  EXPECT_EQ(stats(kTopic).subscriptions.size(), 1u);  // a durable one stays
}

TEST_F(TopicTest, AReaderSubscriptionLeftWithoutItsConsumersBySeekGoesAtHousekeeping) {
  ASSERT_TRUE(add_producer(kTopic, 1, "producer-a").is_ok());
  auto positions = publish(kTopic, 1, 3);
  RecordingSink& a = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, reader("r", std::nullopt, InitialPosition::kEarliest), &a).is_ok());
  // A seek detaches the reader's consumers (its client comes back to the
  // new position); this one never does.
  EXPECT_TRUE(on_topic<Status>(kTopic, [&](Topic& t, auto done) {
                t.seek_subscription("r", positions.front(), done);
              }).is_ok());
  auto housekeeping = [&]() {
    return on_topic<std::vector<std::string>>(kTopic, [](Topic& t, auto done) {
      t.maintain_producers();
      done(t.subscription_names());
    });
  };
  EXPECT_EQ(housekeeping(), std::vector<std::string>{"r"});  // its reader may still come back
  EXPECT_TRUE(housekeeping().empty());                        // it did not
}

TEST_F(TopicTest, NonPersistentTopicsDeliverToConnectedConsumers) {
  const std::string np = "non-persistent://public/default/ticks";
  ASSERT_TRUE(add_producer(np, 1, "p").is_ok());
  RecordingSink& sink = new_sink();
  ASSERT_TRUE(subscribe(np, 1, options("s", SubscriptionType::kExclusive, InitialPosition::kLatest), &sink).is_ok());
  flow(np, "s", 1, 10);
  publish(np, 1, 3);
  ASSERT_EQ(sink.wait_for(3).size(), 3u);
}

TEST_F(TopicTest, UnsubscribeNeedsNoConsumersAndClosingTellsThem) {
  RecordingSink& sink = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, options("s", SubscriptionType::kExclusive), &sink).is_ok());
  EXPECT_EQ(on_topic<Status>(kTopic, [](Topic& t, auto done) { done(t.unsubscribe("s")); }).code(),
            common::ErrorCode::kFailedPrecondition);
  EXPECT_EQ(on_topic<Status>(kTopic, [](Topic& t, auto done) { done(t.unsubscribe("nope")); }).code(),
            common::ErrorCode::kNotFound);
  broker_->stop();
  EXPECT_TRUE(sink.wait_closed());
}

}  // namespace
}  // namespace magnetar::broker

namespace magnetar::broker {
namespace {

// Reactors with a mailbox of four tasks: work for a topic posted from
// another reactor overflows it at once.
// Another owner opened the topic's log (as a cluster member that took the
// bundle over does), fencing the ledger this node writes: the publish that
// finds out is refused as retriable (not fenced: a Pulsar producer takes that
// as final), the topic closes here (its consumers are told) and writes
// nothing more, and once the other owner is done the next use loads it again.
TEST_F(TopicTest, ATopicWhoseLogAnotherOwnerTookOverClosesHereAndLosesNothing) {
  auto& taken = common::MetricsRegistry::global().counter("magnetar_ledger_taken_over_total", "");
  const uint64_t taken_before = taken.value();
  RecordingSink& sink = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 5, options("sub", SubscriptionType::kExclusive), &sink).is_ok());
  ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());
  publish(kTopic, 1, 3, "before");
  const std::string key = managed_ledger_key(*TopicName::parse(kTopic));
  const std::string log_name = key.substr(std::string_view("/managed-ledgers/").size());
  ledger::LedgerIdAllocator ids(*store_);
  auto opened = std::make_shared<std::promise<Result<std::shared_ptr<ledger::ManagedLedger>>>>();
  runtime_->reactor(1).post_or_wait([&, opened]() {
    ledger::ManagedLedger::open(log_name, {}, *storage_, *store_, ids, [opened](auto ml) { opened->set_value(ml); });
  });
  auto other = opened->get_future().get();
  ASSERT_TRUE(other.is_ok()) << other.status().to_string();

  auto refused = on_topic<Result<Position>>(kTopic, [](Topic& t, auto done) {
    t.publish(1, {}, Slice::copy_of("late"), done);
  });
  EXPECT_EQ(refused.status().code(), common::ErrorCode::kWrongNode) << refused.status().to_string();
  EXPECT_NE(refused.status().message().find("moved to another node"), std::string::npos);
  EXPECT_TRUE(sink.wait_closed());
  EXPECT_EQ(taken.value(), taken_before + 1);
  auto deadline = std::chrono::steady_clock::now() + kWait;
  auto loaded = [&] {
    auto names = broker_->loaded_topic_names();
    return std::find(names.begin(), names.end(), kTopic) != names.end();
  };
  while (loaded() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_FALSE(loaded());

  // The other owner closes; this node loads the topic again and goes on after its entries.
  auto closed = std::make_shared<std::promise<Status>>();
  runtime_->reactor(1).post_or_wait([&, closed]() { (*other)->close([closed](Status st) { closed->set_value(st); }); });
  ASSERT_TRUE(closed->get_future().get().is_ok());
  ASSERT_TRUE(add_producer(kTopic, 2, "q").is_ok());
  publish(kTopic, 2, 2, "after");
  RecordingSink& again = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 6, options("sub2", SubscriptionType::kExclusive), &again).is_ok());
  flow(kTopic, "sub2", 6, 100);
  auto got = again.wait_for(5);
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0].payload.view(), "before0");
  EXPECT_EQ(got[2].payload.view(), "before2");
  EXPECT_EQ(got[3].payload.view(), "after0");
  EXPECT_EQ(got[4].payload.view(), "after1");
}

class BusyHomeTest : public BrokerFixture {
 protected:
  void SetUp() override {
    mailbox_capacity_ = 4;
    BrokerFixture::SetUp();
  }
};

TEST_F(BusyHomeTest, WorkForATopicIsNeverDroppedWhenItsHomeMailboxIsFull) {
  ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());  // loaded
  auto topic = *TopicName::parse(kTopic);
  constexpr int kCalls = 2000;
  struct Seen {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<int> order[2];
    int total = 0;
  };
  auto seen = std::make_shared<Seen>();
  // Each reactor asks for the topic kCalls times in one go; one of them is
  // not the topic's home, so its calls cross a four-task mailbox.
  for (size_t r = 0; r < 2; ++r) {
    runtime_->reactor(r).post_or_wait([this, r, topic, seen]() {
      for (int i = 0; i < kCalls; ++i) {
        broker_->with_topic(topic, [r, i, seen](Result<Topic*> t) {
          std::lock_guard lock(seen->mu);
          if (t.is_ok()) seen->order[r].push_back(i);
          ++seen->total;
          seen->cv.notify_all();
        });
      }
    });
  }
  std::unique_lock lock(seen->mu);
  ASSERT_TRUE(seen->cv.wait_for(lock, kWait, [&] { return seen->total == 2 * kCalls; }))
      << "answered " << seen->total << " of " << 2 * kCalls;
  for (auto& o : seen->order) {
    ASSERT_EQ(o.size(), static_cast<size_t>(kCalls));
    EXPECT_TRUE(std::is_sorted(o.begin(), o.end()));  // each caller's work in its order
  }
}

}  // namespace
}  // namespace magnetar::broker
