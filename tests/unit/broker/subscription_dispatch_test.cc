// The subscription dispatcher on a real broker: Key_Shared ordering while
// consumers join and leave, sticky range conflicts, delayed delivery,
// unacked-message limits, batch-index acknowledgements, redelivery counts
// and delivery credit.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>

#include "utils/broker_fixture.h"

namespace magnetar::broker {
namespace {

const std::string kTopic = "persistent://public/default/dispatch";

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

class DispatchTest : public BrokerFixture {
 protected:
  void SetUp() override {
    BrokerFixture::SetUp();
    ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());
  }

  Position publish_one(const std::string& payload, const std::string& key = "", int64_t deliver_at_ms = 0,
                       uint32_t messages = 1) {
    auto r = on_topic<Result<Position>>(kTopic, [&](Topic& t, auto done) {
      ledger::MessageHeader h;
      h.sequence_id = next_sequence_++;
      h.key = key;
      h.deliver_at_ms = deliver_at_ms;
      h.messages = messages;
      t.publish(1, h, Slice::copy_of(payload), done);
    });
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r.is_ok() ? *r : Position{};
  }

  // Runs fn(subscription) on the topic's home reactor.
  template <typename T>
  T on_sub(const std::string& sub, std::function<T(Subscription&)> fn) {
    return on_topic<T>(kTopic, [&](Topic& t, auto done) { done(fn(*t.subscription(sub))); });
  }

  static ConsumerOptions key_shared(const std::string& sub, std::vector<HashRange> sticky = {}) {
    ConsumerOptions o = options(sub, SubscriptionType::kKeyShared);
    if (!sticky.empty()) {
      o.key_shared_mode = KeySharedMode::kSticky;
      o.hash_ranges = std::move(sticky);
    }
    return o;
  }

  // A key whose slot is in [lo, hi], found by trying "key-0", "key-1", ...
  static std::string key_in(uint32_t lo, uint32_t hi, int skip = 0) {
    for (int i = 0;; ++i) {
      std::string k = "key-" + std::to_string(i);
      uint32_t slot = sticky_key_slot(k);
      if (slot >= lo && slot <= hi && skip-- == 0) return k;
    }
  }

  // Waits (bounded) until a and b together got at least n; returns how many they got.
  static size_t wait_total(RecordingSink& a, RecordingSink& b, size_t n) {
    for (int i = 0; i < 1000; ++i) {
      if (a.wait_for(0).size() + b.wait_for(0).size() >= n) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return a.wait_for(0).size() + b.wait_for(0).size();
  }

  int64_t next_sequence_ = 0;
};

// Each key's payloads in the order `got` has them.
std::map<std::string, std::vector<std::string>> by_key(const std::vector<Delivery>& got) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& d : got) out[d.header.key].push_back(d.payload.to_string());
  return out;
}

TEST_F(DispatchTest, KeySharedGivesEachKeyToOneConsumerInOrder) {
  RecordingSink& a = new_sink();
  RecordingSink& b = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, key_shared("ks"), &a).is_ok());
  ASSERT_TRUE(subscribe(kTopic, 2, key_shared("ks"), &b).is_ok());
  flow(kTopic, "ks", 1, 1000);
  flow(kTopic, "ks", 2, 1000);
  std::vector<std::string> keys;
  for (int k = 0; k < 8; ++k) keys.push_back(key_in(0, 65535, k));
  for (int i = 0; i < 80; ++i) publish_one(std::to_string(i), keys[i % 8]);
  publish_one("no-key");
  ASSERT_EQ(wait_total(a, b, 81), 81u);
  auto got_a = a.wait_for(0);
  auto got_b = b.wait_for(0);
  auto ka = by_key(got_a);
  auto kb = by_key(got_b);
  for (const auto& k : keys) {
    EXPECT_TRUE(ka.count(k) == 0 || kb.count(k) == 0) << k << " went to both consumers";
    const auto& seq = ka.count(k) ? ka[k] : kb[k];
    ASSERT_EQ(seq.size(), 10u) << k;
    for (size_t i = 1; i < seq.size(); ++i) EXPECT_LT(std::stoi(seq[i - 1]), std::stoi(seq[i])) << k;
  }
  // The split is Pulsar's: consumer 2 owns [0, 32767], consumer 1 the rest.
  for (const auto& d : got_b) EXPECT_LE(sticky_key_slot(d.header.key.empty() ? "NONE_KEY" : d.header.key), 32767u);
  for (const auto& d : got_a) EXPECT_GE(sticky_key_slot(d.header.key.empty() ? "NONE_KEY" : d.header.key), 32768u);
}

TEST_F(DispatchTest, AJoiningConsumerGetsAMovedKeyOnlyAfterTheOldOwnerAckedIt) {
  std::string moving = key_in(0, 32767);      // goes to the consumer that joins
  std::string staying = key_in(32768, 65535);  // stays with the first one
  RecordingSink& a = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, key_shared("ks"), &a).is_ok());
  flow(kTopic, "ks", 1, 1000);
  std::vector<Position> moved_positions;
  for (int i = 0; i < 3; ++i) moved_positions.push_back(publish_one("m" + std::to_string(i), moving));
  publish_one("s0", staying);
  ASSERT_EQ(a.wait_for(4).size(), 4u);

  RecordingSink& b = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 2, key_shared("ks"), &b).is_ok());
  flow(kTopic, "ks", 2, 1000);
  publish_one("m3", moving);
  publish_one("s1", staying);
  // The staying key flows on; the moved key waits while `a` holds m0..m2.
  ASSERT_EQ(a.wait_for(5).size(), 5u);
  EXPECT_EQ(a.wait_for(5)[4].payload.view(), "s1");
  EXPECT_EQ(b.settle_count(), 0u);
  ASSERT_TRUE(ack(kTopic, "ks", 1, moved_positions[0]).is_ok());
  ASSERT_TRUE(ack(kTopic, "ks", 1, moved_positions[1]).is_ok());
  EXPECT_EQ(b.settle_count(), 0u);  // m2 is still out
  ASSERT_TRUE(ack(kTopic, "ks", 1, moved_positions[2]).is_ok());
  auto got_b = b.wait_for(1);
  ASSERT_EQ(got_b.size(), 1u);
  EXPECT_EQ(got_b[0].payload.view(), "m3");
  publish_one("m4", moving);
  got_b = b.wait_for(2);
  ASSERT_EQ(got_b.size(), 2u);
  EXPECT_EQ(got_b[1].payload.view(), "m4");
  EXPECT_EQ(a.settle_count(), 5u);
}

TEST_F(DispatchTest, ALeavingConsumersKeysGoToTheNextOwnerBeforeNewerEntries) {
  std::string key = key_in(0, 32767);  // owned by consumer 2 while it is there
  RecordingSink& a = new_sink();
  RecordingSink& b = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, key_shared("ks"), &a).is_ok());
  ASSERT_TRUE(subscribe(kTopic, 2, key_shared("ks"), &b).is_ok());
  flow(kTopic, "ks", 1, 1000);
  flow(kTopic, "ks", 2, 1000);
  for (int i = 0; i < 3; ++i) publish_one("k" + std::to_string(i), key);
  ASSERT_EQ(b.wait_for(3).size(), 3u);
  on_sub<bool>("ks", [](Subscription& s) {
    s.remove_consumer(2);
    return true;
  });
  publish_one("k3", key);
  auto got = a.wait_for(4);
  ASSERT_EQ(got.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i].payload.view(), "k" + std::to_string(i));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(got[i].redelivery_count, 1u);
  EXPECT_EQ(got[3].redelivery_count, 0u);
}

TEST_F(DispatchTest, KeySharedWaitsForPermitsWithoutReorderingAKey) {
  std::string key = key_in(0, 65535);
  RecordingSink& a = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, key_shared("ks"), &a).is_ok());
  for (int i = 0; i < 6; ++i) publish_one(std::to_string(i), key);
  flow(kTopic, "ks", 1, 2);
  ASSERT_EQ(a.wait_for(2).size(), 2u);
  EXPECT_EQ(a.settle_count(), 2u);
  flow(kTopic, "ks", 1, 10);
  auto got = a.wait_for(6);
  ASSERT_EQ(got.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(got[i].payload.view(), std::to_string(i));
}

// A dispatch rate's message allowance bounds what one dispatch hands out,
// for every subscription type: with a bucket of one message (1 msg/s) and a
// backlog of 20, one message goes out and the rest wait for tokens.
TEST_F(DispatchTest, EveryTypeHandsOutNoMoreThanTheDispatchRateAllows) {
  std::vector<std::string> keys;
  for (int k = 0; k < 4; ++k) keys.push_back(key_in(0, 65535, k));
  for (int i = 0; i < 20; ++i) publish_one(std::to_string(i), keys[i % 4]);
  uint64_t id = 1;
  for (auto type : {SubscriptionType::kExclusive, SubscriptionType::kShared, SubscriptionType::kKeyShared}) {
    const std::string sub = "rate-" + std::to_string(id);
    RecordingSink& sink = new_sink();
    ASSERT_TRUE(subscribe(kTopic, id, options(sub, type), &sink).is_ok());
    on_sub<bool>(sub, [](Subscription& s) {
      s.set_dispatch_limits(nullptr, nullptr, 1, -1);
      return true;
    });
    flow(kTopic, sub, id, 1000);
    ASSERT_EQ(sink.wait_for(1).size(), 1u) << sub;
    EXPECT_EQ(sink.settle_count(), 1u) << sub;  // the other 19 wait for the next token
    EXPECT_GT(on_sub<uint64_t>(sub, [](Subscription& s) { return s.dispatch_rate_limited_times(); }), 0u) << sub;
    ++id;
  }
}

TEST_F(DispatchTest, StickyRangesThatOverlapAreRefused) {
  RecordingSink& a = new_sink();
  RecordingSink& b = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, key_shared("sticky", {{0, 32767}}), &a).is_ok());
  Status conflict = subscribe(kTopic, 2, key_shared("sticky", {{30000, 40000}}), &b);
  EXPECT_EQ(conflict.code(), common::ErrorCode::kFailedPrecondition) << conflict.to_string();
  Status wrong_mode = subscribe(kTopic, 3, key_shared("sticky"), &b);
  EXPECT_EQ(wrong_mode.code(), common::ErrorCode::kInvalidArgument) << wrong_mode.to_string();
  ASSERT_TRUE(subscribe(kTopic, 4, key_shared("sticky", {{32768, 65535}}), &b).is_ok());
  flow(kTopic, "sticky", 1, 100);
  flow(kTopic, "sticky", 4, 100);
  std::string low = key_in(0, 32767);
  std::string high = key_in(32768, 65535);
  publish_one("low", low);
  publish_one("high", high);
  ASSERT_EQ(a.wait_for(1).size(), 1u);
  ASSERT_EQ(b.wait_for(1).size(), 1u);
  EXPECT_EQ(a.wait_for(1)[0].payload.view(), "low");
  EXPECT_EQ(b.wait_for(1)[0].payload.view(), "high");
}

TEST_F(DispatchTest, SharedHoldsDelayedEntriesUntilTheyAreDue) {
  RecordingSink& a = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, options("shared", SubscriptionType::kShared), &a).is_ok());
  flow(kTopic, "shared", 1, 100);
  int64_t due = now_ms() + 1500;
  publish_one("later", "", due);
  publish_one("now");
  auto got = a.wait_for(1);
  ASSERT_GE(got.size(), 1u);
  EXPECT_EQ(got[0].payload.view(), "now");
  EXPECT_EQ(on_sub<uint64_t>("shared", [](Subscription& s) { return s.stats().delayed_entries; }), 1u);
  got = a.wait_for(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].payload.view(), "later");
  EXPECT_GE(now_ms(), due);
  EXPECT_EQ(got[1].redelivery_count, 0u);
  EXPECT_EQ(a.settle_count(), 2u);
}

TEST_F(DispatchTest, KeySharedHoldsDelayedEntriesToo) {
  RecordingSink& a = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, key_shared("ks"), &a).is_ok());
  flow(kTopic, "ks", 1, 100);
  int64_t due = now_ms() + 1000;
  publish_one("later", "k", due);
  publish_one("now", "k");
  auto got = a.wait_for(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].payload.view(), "now");
  EXPECT_EQ(got[1].payload.view(), "later");
  EXPECT_GE(now_ms(), due);
}

TEST_F(DispatchTest, ExclusiveDeliversDelayedEntriesAtOnce) {
  RecordingSink& a = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, options("excl", SubscriptionType::kExclusive), &a).is_ok());
  flow(kTopic, "excl", 1, 100);
  publish_one("in-an-hour", "", now_ms() + 3600 * 1000);
  auto got = a.wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload.view(), "in-an-hour");
}

TEST_F(DispatchTest, AConsumerAtItsUnackedLimitWaitsUntilAcksBringItToHalf) {
  RecordingSink& a = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, options("limited", SubscriptionType::kShared), &a).is_ok());
  on_sub<bool>("limited", [](Subscription& s) {
    s.set_unacked_limits(10, 0);
    return true;
  });
  std::vector<Position> ps;
  for (int i = 0; i < 30; ++i) ps.push_back(publish_one(std::to_string(i)));
  flow(kTopic, "limited", 1, 1000);
  ASSERT_EQ(a.wait_for(10).size(), 10u);
  EXPECT_EQ(a.settle_count(), 10u);
  EXPECT_TRUE(stats(kTopic).subscriptions[0].consumer_list[0].blocked_on_unacked);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(ack(kTopic, "limited", 1, ps[i]).is_ok());
  EXPECT_EQ(a.settle_count(), 10u);  // 6 unacked: still over half
  ASSERT_TRUE(ack(kTopic, "limited", 1, ps[4]).is_ok());
  ASSERT_EQ(a.wait_for(15).size(), 15u);  // 5 unacked: 5 more fit
  EXPECT_EQ(a.settle_count(), 15u);
  auto got = a.wait_for(15);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(got[i].payload.view(), std::to_string(i));
}

TEST_F(DispatchTest, TheSubscriptionLimitHoldsEveryConsumer) {
  RecordingSink& a = new_sink();
  RecordingSink& b = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, key_shared("limited"), &a).is_ok());
  ASSERT_TRUE(subscribe(kTopic, 2, key_shared("limited"), &b).is_ok());
  on_sub<bool>("limited", [](Subscription& s) {
    s.set_unacked_limits(0, 8);
    return true;
  });
  std::vector<Position> ps;
  for (int i = 0; i < 40; ++i) ps.push_back(publish_one(std::to_string(i), "k" + std::to_string(i % 10)));
  flow(kTopic, "limited", 1, 1000);
  flow(kTopic, "limited", 2, 1000);
  ASSERT_EQ(wait_total(a, b, 8), 8u);
  EXPECT_EQ(a.settle_count() + b.settle_count(), 8u);
  EXPECT_TRUE(stats(kTopic).subscriptions[0].blocked_on_unacked);
  // Acknowledging everything delivered, in one go on the home reactor (so
  // the dispatcher runs once, after all of them), frees room for 8 more.
  std::vector<std::pair<uint64_t, Position>> delivered;
  for (const auto& d : a.wait_for(0)) delivered.emplace_back(1, d.position);
  for (const auto& d : b.wait_for(0)) delivered.emplace_back(2, d.position);
  Status acked = on_sub<Status>("limited", [&](Subscription& s) {
    Status st;
    for (const auto& [consumer, p] : delivered) {
      if (Status one = s.ack(consumer, p); !one.is_ok()) st = one;
    }
    return st;
  });
  ASSERT_TRUE(acked.is_ok()) << acked.to_string();
  EXPECT_EQ(wait_total(a, b, 16), 16u);
  EXPECT_EQ(a.settle_count() + b.settle_count(), 16u);
}

TEST_F(DispatchTest, BatchIndexAcksAreSkippedOnRedelivery) {
  RecordingSink& a = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, options("batch", SubscriptionType::kShared), &a).is_ok());
  flow(kTopic, "batch", 1, 100);
  Position p = publish_one("four-messages", "", 0, 4);
  ASSERT_EQ(a.wait_for(1).size(), 1u);
  // ack_set 0b1010: messages 1 and 3 still unacknowledged, 0 and 2 acked.
  Status st = on_sub<Status>("batch", [p](Subscription& s) { return s.ack_batch(1, p, {0b1010}, 0); });
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  auto sub = stats(kTopic).subscriptions[0];
  EXPECT_EQ(sub.unacked_messages, 2u);
  EXPECT_EQ(sub.backlog_messages, 2u);
  on_sub<bool>("batch", [p](Subscription& s) {
    s.redeliver_unacknowledged(1, {p});
    return true;
  });
  auto got = a.wait_for(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].position, p);
  EXPECT_EQ(got[1].redelivery_count, 1u);
  EXPECT_EQ(got[1].batch_acks, (std::vector<uint64_t>{0b0101}));
  st = on_sub<Status>("batch", [p](Subscription& s) { return s.ack_batch(1, p, {0}, 4); });
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  sub = stats(kTopic).subscriptions[0];
  EXPECT_EQ(sub.backlog_entries, 0u);
  EXPECT_EQ(sub.unacked_entries, 0u);
}

TEST_F(DispatchTest, RedeliveryCountGrowsWithEachRedelivery) {
  RecordingSink& a = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, options("nack", SubscriptionType::kShared), &a).is_ok());
  flow(kTopic, "nack", 1, 100);
  Position p = publish_one("poison");
  publish_one("fine");
  ASSERT_EQ(a.wait_for(2).size(), 2u);
  for (uint32_t round = 1; round <= 3; ++round) {
    on_sub<bool>("nack", [p](Subscription& s) {
      s.redeliver_unacknowledged(1, {p});
      return true;
    });
    auto got = a.wait_for(2 + round);
    ASSERT_EQ(got.size(), 2 + round);
    EXPECT_EQ(got.back().position, p);
    EXPECT_EQ(got.back().redelivery_count, round);
  }
  ASSERT_TRUE(ack(kTopic, "nack", 1, p).is_ok());
  EXPECT_EQ(a.settle_count(), 5u);
}


// A consumer with a delivery credit gets what the credit covers, whatever
// its permits, and the rest as credit is added, in order, for every type.
TEST_F(DispatchTest, EveryTypeStopsAtItsDeliveryCreditAndGoesOnWhenCreditIsAdded) {
  const std::string payload(100, 'x');
  std::vector<std::string> keys;
  for (int k = 0; k < 4; ++k) keys.push_back(key_in(0, 65535, k));
  for (int i = 0; i < 20; ++i) publish_one(payload + std::to_string(i % 10), keys[i % 4]);
  const int64_t cost = delivery_cost(payload.size() + 1);
  uint64_t id = 1;
  for (auto type : {SubscriptionType::kExclusive, SubscriptionType::kFailover, SubscriptionType::kShared,
                    SubscriptionType::kKeyShared}) {
    const std::string sub = "credit-" + std::to_string(id);
    RecordingSink& sink = new_sink();
    ConsumerOptions o = options(sub, type);
    o.delivery_credit = 3 * cost;
    ASSERT_TRUE(subscribe(kTopic, id, o, &sink).is_ok());
    flow(kTopic, sub, id, 1000);
    ASSERT_EQ(sink.wait_for(3).size(), 3u) << sub;
    EXPECT_EQ(sink.settle_count(), 3u) << sub;
    EXPECT_EQ(on_sub<int64_t>(sub, [id](Subscription& s) { return s.consumer(id)->credit(); }), 0) << sub;
    on_sub<bool>(sub, [id, cost](Subscription& s) {
      s.add_credit(id, 2 * cost);
      return true;
    });
    ASSERT_EQ(sink.wait_for(5).size(), 5u) << sub;
    EXPECT_EQ(sink.settle_count(), 5u) << sub;
    on_sub<bool>(sub, [id, cost](Subscription& s) {
      s.add_credit(id, 100 * cost);
      return true;
    });
    auto got = sink.wait_for(20);
    ASSERT_EQ(got.size(), 20u) << sub;
    EXPECT_EQ(sink.settle_count(), 20u) << sub;
    for (size_t i = 1; i < got.size(); ++i) EXPECT_LT(got[i - 1].position, got[i].position) << sub;
    ++id;
  }
}

// An entry larger than what is left of the credit still goes (the credit
// is a bound, not a size filter); the next one waits until credit brings
// it back above zero.
TEST_F(DispatchTest, AnEntryOvershootsTheCreditOnce) {
  const std::string large(4000, 'L');
  publish_one(large);
  publish_one(large);
  RecordingSink& a = new_sink();
  ConsumerOptions o = options("overshoot", SubscriptionType::kExclusive);
  o.delivery_credit = 1;
  ASSERT_TRUE(subscribe(kTopic, 1, o, &a).is_ok());
  flow(kTopic, "overshoot", 1, 10);
  ASSERT_EQ(a.wait_for(1).size(), 1u);
  EXPECT_EQ(a.settle_count(), 1u);
  const int64_t cost = delivery_cost(large.size());
  EXPECT_EQ(on_sub<int64_t>("overshoot", [](Subscription& s) { return s.consumer(1)->credit(); }), 1 - cost);
  on_sub<bool>("overshoot", [cost](Subscription& s) {
    s.add_credit(1, cost - 1);  // back to zero: still nothing
    return true;
  });
  EXPECT_EQ(a.settle_count(), 1u);
  on_sub<bool>("overshoot", [](Subscription& s) {
    s.add_credit(1, 1);
    return true;
  });
  ASSERT_EQ(a.wait_for(2).size(), 2u);
  // Permits were not what held it back: they are all still there but two.
  EXPECT_EQ(stats(kTopic).subscriptions[0].consumer_list[0].permits, 8);
}

// What one Shared consumer's credit cannot take goes to the others.
TEST_F(DispatchTest, SharedGivesWhatOneConsumersCreditCannotTakeToAnother) {
  const std::string payload(100, 's');
  RecordingSink& a = new_sink();
  RecordingSink& b = new_sink();
  ConsumerOptions oa = options("shared-credit", SubscriptionType::kShared);
  oa.delivery_credit = 2 * delivery_cost(payload.size());
  ASSERT_TRUE(subscribe(kTopic, 1, oa, &a).is_ok());
  ASSERT_TRUE(subscribe(kTopic, 2, options("shared-credit", SubscriptionType::kShared), &b).is_ok());
  flow(kTopic, "shared-credit", 1, 1000);
  flow(kTopic, "shared-credit", 2, 1000);
  for (int i = 0; i < 12; ++i) publish_one(payload);
  EXPECT_EQ(wait_total(a, b, 12), 12u);
  EXPECT_EQ(a.settle_count(), 2u);
  EXPECT_EQ(b.settle_count(), 10u);
}

// Publishers that must not outrun consumers (when_caught_up) wait while
// dispatch is more than kLagEntries behind consumers that could take more,
// and go on once it caught up to half of that; a consumer without permits
// sets the pace itself and holds nobody.
TEST_F(DispatchTest, PublishersWaitWhileDispatchIsBehindConsumersThatCouldTakeMore) {
  RecordingSink& sink = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 1, options("flow", SubscriptionType::kShared), &sink).is_ok());
  const size_t stored = Subscription::kLagEntries + 500;
  for (size_t i = 0; i < stored; ++i) publish_one("m" + std::to_string(i));
  // No permits: nothing waits on this consumer.
  EXPECT_TRUE(on_sub<bool>("flow", [](Subscription& s) {
    bool ran = false;
    s.when_caught_up([&ran]() { ran = true; });
    return ran;
  }));
  // Permits, and every stored entry still to dispatch: the publisher waits.
  auto released = std::make_shared<std::atomic<size_t>>(SIZE_MAX);
  auto delivered_then = std::make_shared<std::atomic<size_t>>(0);
  EXPECT_FALSE(on_sub<bool>("flow", [&](Subscription& s) {
    s.flow(1, static_cast<uint32_t>(stored));
    s.when_caught_up([released, delivered_then, &sink]() {
      delivered_then->store(sink.wait_for(0).size());
      released->store(1);
    });
    return released->load() != SIZE_MAX;
  }));
  ASSERT_EQ(sink.wait_for(stored).size(), stored);
  for (int i = 0; i < 500 && released->load() == SIZE_MAX; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(released->load(), 1u);
  // Released once no more than half the lag was left to dispatch.
  EXPECT_GE(delivered_then->load(), stored - Subscription::kLagEntries / 2);
}

}  // namespace
}  // namespace magnetar::broker
