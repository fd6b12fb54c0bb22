// Trace records (trace_record.h), the tracing policy, per-entry sampling
// (tracing.h) and the look-up's matching (trace_lookup.h), without a broker.
#include <gtest/gtest.h>

#include <limits>

#include "broker/policies.h"
#include "broker/trace_lookup.h"
#include "broker/trace_record.h"
#include "broker/tracing.h"
#include "runtime/runtime.h"
#include "utils/trace_queries.h"

namespace magnetar::broker {
namespace {

using ledger::Position;

TraceEvent received(Position p, int64_t t, std::string key, std::vector<std::pair<std::string, std::string>> props,
                    std::string producer = "p1") {
  TraceEvent e;
  e.stage = TraceStage::kReceived;
  e.time_ms = t;
  e.position = p;
  e.producer = std::move(producer);
  e.messages.push_back(TracedMessage{std::move(key), std::move(props)});
  return e;
}

TraceEvent at(TraceStage s, Position p, int64_t t, std::string sub = "") {
  TraceEvent e;
  e.stage = s;
  e.time_ms = t;
  e.position = p;
  e.subscription = std::move(sub);
  return e;
}

TraceEvent range(TraceStage s, Position after, Position last, int64_t t, std::string sub = "") {
  TraceEvent e = at(s, last, t, std::move(sub));
  e.range = true;
  e.after = after;
  return e;
}

std::vector<TraceStage> stages_of(const MessageTrace& m) {
  std::vector<TraceStage> out;
  for (const auto& e : m.stages) out.push_back(e.stage);
  return out;
}

TEST(TraceRecordTest, BatchesRoundTripAndGarbageIsCorruption) {
  std::vector<TraceEvent> events;
  events.push_back(received({3, 7}, 1000, "k", {{"order", "42"}, {"traceparent", "00-abc-def-01"}}));
  TraceEvent d = at(TraceStage::kDispatched, {3, 7}, 1005, "sub");
  d.consumer_id = 9;
  d.consumer_name = "c1";
  d.client_address = "127.0.0.1:5000";
  d.protocol = "pulsar";
  d.redelivery_count = 2;
  events.push_back(d);
  events.push_back(range(TraceStage::kExpired, {3, 1}, {3, 9}, 2000, "sub"));
  TraceEvent a = at(TraceStage::kAcked, {3, 7}, 1010, "sub");
  a.batch_index = 4;
  events.push_back(a);
  auto bytes = encode_trace_batch("persistent://t/ns/x", events);
  auto back = decode_trace_batch(bytes);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->topic, "persistent://t/ns/x");
  EXPECT_EQ(back->events, events);

  auto garbage = decode_trace_batch(common::Slice::copy_of("not a trace batch at all"));
  EXPECT_EQ(garbage.status().code(), common::ErrorCode::kCorruption);
}

TEST(TraceRecordTest, RangesCoverWhatFollowsTheirStartThroughTheirEnd) {
  TraceEvent e = range(TraceStage::kExpired, {3, 1}, {3, 9}, 0);
  EXPECT_FALSE(e.covers({3, 1}));
  EXPECT_TRUE(e.covers({3, 2}));
  EXPECT_TRUE(e.covers({3, 9}));
  EXPECT_FALSE(e.covers({3, 10}));
  TraceEvent single = at(TraceStage::kAcked, {3, 4}, 0);
  EXPECT_TRUE(single.covers({3, 4}));
  EXPECT_FALSE(single.covers({3, 5}));
}

TEST(TracingPolicyTest, ValidatesModesRatesAndRetention) {
  EXPECT_TRUE(validate(TracingPolicy{TraceMode::kAll}).is_ok());
  EXPECT_TRUE(validate(TracingPolicy{TraceMode::kSampled, 0.01}).is_ok());
  EXPECT_FALSE(validate(TracingPolicy{TraceMode::kSampled, 0}).is_ok());
  EXPECT_FALSE(validate(TracingPolicy{TraceMode::kSampled, 1.5}).is_ok());
  EXPECT_FALSE(validate(TracingPolicy{TraceMode::kAll, 1, 0, 10}).is_ok());
  EXPECT_TRUE(validate(TracingPolicy{TraceMode::kAll, 1, -1, -1}).is_ok());
  EXPECT_EQ(parse_trace_mode("sampled").value(), TraceMode::kSampled);
  EXPECT_FALSE(parse_trace_mode("most").is_ok());

  NamespacePolicies p;
  p.tracing = TracingPolicy{TraceMode::kSampled, 0.25, 60, 10};
  auto back = decode_policies(encode_policies(p));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(*back, p);
  EXPECT_FALSE(decode_policies(encode_policies(NamespacePolicies{}))->tracing.has_value());
}

TEST(TracingPolicyTest, SamplingDecidesPerPositionTheSameWayEveryTime) {
  auto topic = TopicName::parse("persistent://t/ns/x").value();
  TopicTracing no_recorder;
  no_recorder.configure(topic, TracingPolicy{TraceMode::kAll}, nullptr);
  EXPECT_FALSE(no_recorder.on());  // without a recorder, tracing stays off

  runtime::Runtime rt(1);  // not started: the recorder only needs its reactor to flush
  TraceRecorder recorder(rt.reactor(0), [](const TopicName&, common::Slice) {}, nullptr);
  TopicTracing sampled;
  sampled.configure(topic, TracingPolicy{TraceMode::kSampled, 0.25}, &recorder);
  ASSERT_TRUE(sampled.on());
  int traced = 0;
  for (int64_t e = 0; e < 20000; ++e) {
    bool t = sampled.traced({7, e});
    EXPECT_EQ(t, sampled.traced({7, e}));
    traced += t;
  }
  EXPECT_GT(traced, 4000);  // about a quarter
  EXPECT_LT(traced, 6000);
  TopicTracing all;
  all.configure(topic, TracingPolicy{TraceMode::kAll}, &recorder);
  EXPECT_TRUE(all.traced({7, 1}));
  // The trace topic itself is never traced.
  TopicTracing traces;
  traces.configure(trace_topic_of(topic.ns), TracingPolicy{TraceMode::kAll}, &recorder);
  EXPECT_FALSE(traces.on());
  all.configure(topic, std::nullopt, &recorder);
  EXPECT_FALSE(all.on());
}

TEST(TraceMatcherTest, TimelineHasEveryStageInOrderWithRangesAndDeadLetters) {
  const std::string topic = "persistent://t/ns/orders";
  TraceMatcher m(topic, by_key("user-1"));
  TraceBatch b1{topic, {}};
  b1.events.push_back(received({5, 0}, 100, "user-1", {{"order", "1"}}));
  b1.events.push_back(at(TraceStage::kPersisted, {5, 0}, 102));
  b1.events.push_back(received({5, 1}, 101, "user-2", {{"order", "2"}}));
  b1.events.push_back(at(TraceStage::kPersisted, {5, 1}, 103));
  b1.events.push_back(at(TraceStage::kDispatched, {5, 0}, 110, "a"));
  b1.events.push_back(at(TraceStage::kNacked, {5, 0}, 120, "a"));
  m.add(b1);
  TraceBatch b2{topic, {}};
  b2.events.push_back(at(TraceStage::kDispatched, {5, 0}, 130, "a"));
  b2.events.push_back(at(TraceStage::kAcked, {5, 0}, 140, "a"));
  // An expiry of a range the message was acknowledged in says nothing new;
  // one of subscription b, which never acknowledged it, does.
  b2.events.push_back(range(TraceStage::kExpired, {5, -1}, {5, 1}, 150, "a"));
  b2.events.push_back(range(TraceStage::kExpired, {5, -1}, {5, 1}, 151, "b"));
  m.add(b2);
  TraceBatch dlq{"persistent://t/ns/orders-a-DLQ", {}};
  dlq.events.push_back(received({9, 3}, 160, "user-1", {{"REAL_TOPIC", topic}, {"ORIGIN_MESSAGE_ID", "5:0:-1"}}));
  m.add(dlq);
  TraceAnswer a = m.finish();
  ASSERT_EQ(a.messages.size(), 1u);
  const MessageTrace& t = a.messages[0];
  EXPECT_EQ(t.position, (Position{5, 0}));
  EXPECT_EQ(stages_of(t), (std::vector<TraceStage>{TraceStage::kReceived, TraceStage::kPersisted,
                                                   TraceStage::kDispatched, TraceStage::kNacked,
                                                   TraceStage::kDispatched, TraceStage::kAcked,
                                                   TraceStage::kExpired, TraceStage::kDeadLettered}));
  EXPECT_EQ(t.stages[6].subscription, "b");
  EXPECT_NE(t.stages[7].detail.find("orders-a-DLQ"), std::string::npos);
  EXPECT_EQ(a.events_scanned, 11u);
}

TEST(TraceMatcherTest, LooksUpByIdPropertyBatchMessageProducerAndTime) {
  const std::string topic = "persistent://t/ns/orders";
  TraceBatch b{topic, {}};
  b.events.push_back(received({5, 0}, 100, "k0", {{"order", "1"}}, "alice"));
  TraceEvent batch = received({5, 1}, 200, "k1", {{"order", "2"}}, "bob");
  batch.messages.push_back(TracedMessage{"k2", {{"order", "3"}}});
  b.events.push_back(batch);
  auto find = [&](TraceQuery q) {
    TraceMatcher m(topic, std::move(q));
    m.add(b);
    return m.finish();
  };
  auto by_id = find(by_position(Position{5, 1}));
  ASSERT_EQ(by_id.messages.size(), 1u);
  EXPECT_EQ(by_id.messages[0].batch_index, -1);
  auto with_property = find(by_property("order", "3"));
  ASSERT_EQ(with_property.messages.size(), 1u);
  EXPECT_EQ(with_property.messages[0].position, (Position{5, 1}));
  EXPECT_EQ(with_property.messages[0].batch_index, 1);
  auto from_alice = find(by_producer("alice", 50, 150));
  ASSERT_EQ(from_alice.messages.size(), 1u);
  EXPECT_EQ(from_alice.messages[0].position, (Position{5, 0}));
  EXPECT_TRUE(find(by_producer("alice", 150)).messages.empty());
  EXPECT_TRUE(find(by_key("nobody")).messages.empty());
  // Another topic's events never match.
  TraceMatcher other("persistent://t/ns/other", by_key("k0"));
  other.add(b);
  EXPECT_TRUE(other.finish().messages.empty());
  TraceQuery first_only = by_producer("", 0);
  first_only.limit = 1;
  auto limited = find(first_only);
  EXPECT_EQ(limited.messages.size(), 1u);
  EXPECT_TRUE(limited.truncated);
}

}  // namespace
}  // namespace magnetar::broker
