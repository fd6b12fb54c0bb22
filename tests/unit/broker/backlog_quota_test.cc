// Backlog quota: the size arithmetic, then its three policies on a topic.
#include "broker/backlog_quota.h"

#include "utils/broker_fixture.h"

namespace magnetar::broker {
namespace {

ledger::LedgerChain chain_of(std::vector<std::pair<int64_t, uint64_t>> ledgers) {  // (entries, bytes)
  ledger::LedgerChain chain;
  uint64_t id = 10;
  for (auto [entries, bytes] : ledgers) {
    ledger::ChainLedger l;
    l.id = id++;
    l.entries = entries;
    l.size = bytes;
    chain.append(l);
  }
  return chain;
}

TEST(BacklogQuotaTest, BacklogBytesCountWhatFollowsTheMarkDeletePosition) {
  auto chain = chain_of({{10, 1000}, {10, 1000}});
  EXPECT_EQ(backlog_bytes_after(chain, Position{10, -1}), 2000u);
  EXPECT_EQ(backlog_bytes_after(chain, Position{10, 4}), 1500u);  // 5 of 10 entries left in the first
  EXPECT_EQ(backlog_bytes_after(chain, Position{11, 9}), 0u);
}

TEST(BacklogQuotaTest, EvictionKeepsTheNewestEntriesThatFit) {
  auto chain = chain_of({{10, 1000}, {10, 1000}});
  EXPECT_FALSE(eviction_point(chain, Position{10, -1}, 2000).has_value());
  auto p = eviction_point(chain, Position{10, -1}, 1500);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(*p, (Position{10, 4}));  // the last 5 entries of the first ledger stay
  EXPECT_LE(backlog_bytes_after(chain, *p), 1500u);
  p = eviction_point(chain, Position{10, -1}, 250);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(*p, (Position{11, 7}));
  p = eviction_point(chain, Position{10, -1}, 1000);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(*p, (Position{10, 9}));
}

TEST(BacklogQuotaTest, OnlyASetSizeLimitCanBeExceeded) {
  BacklogQuota q;
  EXPECT_FALSE(over_size_quota(q, 1u << 30));
  q.limit_size = 100;
  EXPECT_FALSE(over_size_quota(q, 100));
  EXPECT_TRUE(over_size_quota(q, 101));
}

TEST(BacklogQuotaTest, AgeCountsFromTheOldestBacklogMessage) {
  BacklogQuota q;
  q.limit_time = 60;
  EXPECT_FALSE(over_age_quota(q, 1'000'000, 1'000'000 + 60'000));
  EXPECT_TRUE(over_age_quota(q, 1'000'000, 1'000'000 + 60'001));
  EXPECT_FALSE(over_age_quota(q, 0, 1'000'000'000));  // publish time unknown
  q.limit_time = -1;
  EXPECT_FALSE(over_age_quota(q, 1, 1'000'000'000));
}

class BacklogQuotaTopicTest : public BrokerFixture {
 protected:
  void set_quota(BacklogQuotaAction action, int64_t limit) {
    on_topic<bool>(kTopic, [action, limit](Topic& t, auto done) {
      NamespacePolicies p;
      p.backlog_quota_size = BacklogQuota{limit, -1, action};
      t.apply_policies(p);
      done(true);
    });
  }
  void set_age_quota(BacklogQuotaAction action, int64_t limit_seconds) {
    on_topic<bool>(kTopic, [action, limit_seconds](Topic& t, auto done) {
      NamespacePolicies p;
      p.backlog_quota_age = BacklogQuota{-1, limit_seconds, action};
      t.apply_policies(p);
      done(true);
    });
  }
  // Runs the maintenance check and waits (bounded) until `pred` holds.
  bool maintain_until(std::function<bool(Topic&)> pred) {
    auto deadline = std::chrono::steady_clock::now() + kWait;
    while (std::chrono::steady_clock::now() < deadline) {
      bool ok = on_topic<bool>(kTopic, [pred](Topic& t, auto done) {
        if (pred(t)) return done(true);
        t.maintain_producers();
        done(false);
      });
      if (ok) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  static int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  Result<Position> send(uint64_t producer, int i, int64_t publish_time_ms = 0) {
    return on_topic<Result<Position>>(kTopic, [=](Topic& t, auto done) {
      ledger::MessageHeader h;
      h.sequence_id = i;
      h.publish_time_ms = publish_time_ms;
      t.publish(producer, h, Slice::copy_of(std::string(100, 'x')), done);
    });
  }
  const std::string kTopic = "persistent://public/default/quota";
};

TEST_F(BacklogQuotaTopicTest, ProducerExceptionFailsSendsAndRefusesNewProducers) {
  RecordingSink& sink = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, options("slow", SubscriptionType::kExclusive), &sink).is_ok());
  set_quota(BacklogQuotaAction::kProducerException, 250);
  ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());
  Status last = Status::ok();
  for (int i = 0; i < 10 && last.is_ok(); ++i) {
    auto r = send(1, i);
    last = r.is_ok() ? Status::ok() : r.status();
  }
  // The producer was closed once over quota, so the failing send found no producer.
  EXPECT_FALSE(last.is_ok());
  EXPECT_EQ(add_producer(kTopic, 2, "q").code(), common::ErrorCode::kResourceExhausted);
  EXPECT_EQ(on_topic<QuotaBlock>(kTopic, [](Topic& t, auto done) { done(t.quota_block()); }),
            QuotaBlock::kException);
}

TEST_F(BacklogQuotaTopicTest, EvictionMovesTheSlowSubscriptionForward) {
  RecordingSink& sink = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, options("slow", SubscriptionType::kExclusive), &sink).is_ok());
  set_quota(BacklogQuotaAction::kConsumerBacklogEviction, 350);
  ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(send(1, i).is_ok());
  uint64_t backlog = on_topic<uint64_t>(kTopic, [](Topic& t, auto done) { done(t.backlog_bytes()); });
  EXPECT_LE(backlog, 350u);
  auto s = stats(kTopic);
  ASSERT_EQ(s.subscriptions.size(), 1u);
  EXPECT_LT(s.subscriptions[0].backlog_messages, 20u);
  EXPECT_GT(s.subscriptions[0].backlog_messages, 0u);
}

TEST_F(BacklogQuotaTopicTest, HoldKeepsSendsUnansweredUntilTheBacklogShrinks) {
  RecordingSink& sink = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, options("slow", SubscriptionType::kExclusive), &sink).is_ok());
  set_quota(BacklogQuotaAction::kProducerRequestHold, 250);
  ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());
  std::vector<Position> stored;
  for (int i = 0; i < 5; ++i) {
    auto r = send(1, i);
    ASSERT_TRUE(r.is_ok());
    stored.push_back(*r);
    if (on_topic<QuotaBlock>(kTopic, [](Topic& t, auto done) { done(t.quota_block()); }) == QuotaBlock::kHold) break;
  }
  ASSERT_EQ(on_topic<QuotaBlock>(kTopic, [](Topic& t, auto done) { done(t.quota_block()); }), QuotaBlock::kHold);
  EXPECT_EQ(add_producer(kTopic, 2, "q").code(), common::ErrorCode::kResourceExhausted);
  // A send now waits.
  auto held = std::make_shared<std::promise<Result<Position>>>();
  auto fut = held->get_future();
  on_topic<bool>(kTopic, [held](Topic& t, auto done) {
    ledger::MessageHeader h;
    h.sequence_id = 99;
    t.publish(1, h, Slice::copy_of("late"), [held](Result<Position> r) { held->set_value(std::move(r)); });
    done(true);
  });
  EXPECT_EQ(fut.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  // The consumer catches up: the held send is stored.
  flow(kTopic, "slow", 1, 100);
  sink.wait_for(stored.size());
  ASSERT_TRUE(ack(kTopic, "slow", 1, stored.back(), true).is_ok());
  ASSERT_EQ(fut.wait_for(kWait), std::future_status::ready);
  auto r = fut.get();
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_GT(*r, stored.back());
}

TEST_F(BacklogQuotaTopicTest, AnOldBacklogBlocksProducersUnderTheAgeQuota) {
  RecordingSink& sink = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, options("slow", SubscriptionType::kExclusive), &sink).is_ok());
  ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());
  ASSERT_TRUE(send(1, 0, now_ms() - 600'000).is_ok());  // ten minutes old
  set_age_quota(BacklogQuotaAction::kProducerException, 60);
  EXPECT_TRUE(maintain_until([](Topic& t) { return t.quota_block() == QuotaBlock::kException; }));
  EXPECT_EQ(add_producer(kTopic, 2, "q").code(), common::ErrorCode::kResourceExhausted);
}

TEST_F(BacklogQuotaTopicTest, AgeEvictionAcknowledgesOnlyTheOldMessages) {
  RecordingSink& sink = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, options("slow", SubscriptionType::kExclusive), &sink).is_ok());
  ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(send(1, i, now_ms() - 600'000).is_ok());
  for (int i = 3; i < 5; ++i) ASSERT_TRUE(send(1, i, now_ms()).is_ok());
  set_age_quota(BacklogQuotaAction::kConsumerBacklogEviction, 60);
  EXPECT_TRUE(maintain_until([this](Topic& t) {
    auto s = t.stats();
    return !s.subscriptions.empty() && s.subscriptions[0].backlog_messages == 2;
  }));
  EXPECT_EQ(on_topic<QuotaBlock>(kTopic, [](Topic& t, auto done) { done(t.quota_block()); }), QuotaBlock::kNone);
}

}  // namespace
}  // namespace magnetar::broker
