#include "protocol/amqp/server/topology.h"

#include <gtest/gtest.h>

namespace magnetar::protocol::amqp {
namespace {

TEST(AmqpTopologyTest, TopicPatterns) {
  EXPECT_TRUE(topic_matches("a.b.c", "a.b.c"));
  EXPECT_FALSE(topic_matches("a.b.c", "a.b"));
  EXPECT_TRUE(topic_matches("a.*.c", "a.x.c"));
  EXPECT_FALSE(topic_matches("a.*.c", "a.c"));
  EXPECT_FALSE(topic_matches("a.*.c", "a.x.y.c"));
  EXPECT_TRUE(topic_matches("a.#", "a"));
  EXPECT_TRUE(topic_matches("a.#", "a.b.c"));
  EXPECT_TRUE(topic_matches("#", ""));
  EXPECT_TRUE(topic_matches("#", "anything.at.all"));
  EXPECT_TRUE(topic_matches("#.c", "c"));
  EXPECT_TRUE(topic_matches("a.#.c", "a.c"));
  EXPECT_TRUE(topic_matches("a.#.c", "a.b.b.c"));
  EXPECT_FALSE(topic_matches("a.#.c", "a.b.d"));
  EXPECT_TRUE(topic_matches("*.#", "x"));
  EXPECT_TRUE(topic_matches("*", "a"));
  EXPECT_FALSE(topic_matches("*", "a.b"));
  EXPECT_TRUE(topic_matches("", ""));
  EXPECT_FALSE(topic_matches("a", "b"));
}

TEST(AmqpTopologyTest, HeadersMatching) {
  FieldTable all = {{"kind", FieldValue::of_string("a")}, {"size", FieldValue::of_int(2)}};
  FieldTable any = all;
  any.push_back({"x-match", FieldValue::of_string("any")});
  FieldTable both = {{"kind", FieldValue::of_string("a")}, {"size", FieldValue::of_int(2)}};
  FieldValue small;
  small.type = 'b';
  small.i = 2;
  FieldTable narrow = {{"kind", FieldValue::of_string("a")}, {"size", small}};  // another int width
  FieldTable one = {{"kind", FieldValue::of_string("a")}};
  EXPECT_TRUE(headers_match(all, &both));
  EXPECT_TRUE(headers_match(all, &narrow));
  EXPECT_FALSE(headers_match(all, &one));
  EXPECT_TRUE(headers_match(any, &one));
  EXPECT_FALSE(headers_match(any, nullptr));
  EXPECT_TRUE(headers_match({}, nullptr));  // all of nothing
  FieldTable presence = {{"kind", FieldValue()}};
  EXPECT_TRUE(headers_match(presence, &one));
}

TEST(AmqpTopologyTest, RoutingFollowsBindingsAcrossExchangesOnce) {
  Topology t;
  for (const char* q : {"q1", "q2", "q3"}) {
    QueueDef def;
    def.name = q;
    t.put_queue(def);
  }
  ExchangeDef a;
  a.name = "a";
  a.type = ExchangeType::kTopic;
  t.put_exchange(a);
  ExchangeDef b;
  b.name = "b";
  b.type = ExchangeType::kFanout;
  t.put_exchange(b);
  EXPECT_TRUE(t.add_binding({"a", false, "q1", "x.*", {}}));
  EXPECT_FALSE(t.add_binding({"a", false, "q1", "x.*", {}}));  // the same binding twice
  EXPECT_TRUE(t.add_binding({"a", true, "b", "x.#", {}}));
  EXPECT_TRUE(t.add_binding({"b", false, "q2", "", {}}));
  EXPECT_TRUE(t.add_binding({"b", true, "a", "", {}}));  // a cycle
  EXPECT_EQ(t.route("a", "x.y", nullptr), (std::vector<std::string>{"q1", "q2"}));
  EXPECT_EQ(t.route("a", "x.y.z", nullptr), (std::vector<std::string>{"q2"}));
  EXPECT_EQ(t.route("", "q3", nullptr), (std::vector<std::string>{"q3"}));
  EXPECT_TRUE(t.route("", "nope", nullptr).empty());
  EXPECT_TRUE(t.route("amq.direct", "q3", nullptr).empty());
  EXPECT_TRUE(t.exchange_in_use("b"));
  auto removed = t.remove_exchange("b");
  EXPECT_EQ(removed.size(), 3u);
  EXPECT_EQ(t.route("a", "x.y.z", nullptr), std::vector<std::string>{});
  EXPECT_EQ(t.remove_queue("q1").size(), 1u);
  EXPECT_TRUE(t.route("a", "x.y", nullptr).empty());
}

TEST(AmqpTopologyTest, AutoDeleteExchangesGoWithTheirLastBindingInACascade) {
  Topology t;
  QueueDef q;
  q.name = "q";
  t.put_queue(q);
  for (const char* name : {"outer", "inner", "kept"}) {
    ExchangeDef e;
    e.name = name;
    e.type = ExchangeType::kFanout;
    e.auto_delete = std::string(name) != "kept";
    t.put_exchange(e);
  }
  t.add_binding({"outer", true, "inner", "", {}});
  t.add_binding({"inner", false, "q", "", {}});
  t.add_binding({"kept", false, "q", "", {}});
  // Removing the queue leaves inner without bindings, then outer.
  auto [exchanges, bindings] = t.drop_unused_auto_delete(t.remove_queue("q"));
  ASSERT_EQ(exchanges.size(), 2u);
  EXPECT_EQ(exchanges[0].name, "inner");
  EXPECT_EQ(exchanges[1].name, "outer");
  EXPECT_EQ(bindings.size(), 1u);  // outer -> inner
  EXPECT_EQ(t.exchange("inner"), nullptr);
  EXPECT_EQ(t.exchange("outer"), nullptr);
  EXPECT_NE(t.exchange("kept"), nullptr);  // not auto-delete
  EXPECT_TRUE(t.bindings().empty());
}

TEST(AmqpTopologyTest, QueueArgumentsAreCheckedForTypeAndRange) {
  FieldTable ok = {{"x-message-ttl", FieldValue::of_int(1000)}, {"x-max-length", FieldValue::of_int(5)},
                   {"x-expires", FieldValue::of_int(60000)},
                   {"x-dead-letter-exchange", FieldValue::of_string("dlx")},
                   {"x-dead-letter-routing-key", FieldValue::of_string("dead")}};
  auto args = parse_queue_arguments(ok);
  ASSERT_TRUE(args.is_ok());
  EXPECT_EQ(args->message_ttl_ms, 1000);
  EXPECT_EQ(args->max_length, 5);
  EXPECT_EQ(args->expires_ms, 60000);
  EXPECT_EQ(args->dead_letter_exchange, "dlx");
  EXPECT_EQ(args->dead_letter_routing_key, "dead");
  EXPECT_FALSE(parse_queue_arguments({{"x-message-ttl", FieldValue::of_string("soon")}}).is_ok());
  EXPECT_FALSE(parse_queue_arguments({{"x-max-length", FieldValue::of_int(-1)}}).is_ok());
  EXPECT_FALSE(parse_queue_arguments({{"x-expires", FieldValue::of_int(0)}}).is_ok());
  EXPECT_FALSE(parse_queue_arguments({{"x-dead-letter-routing-key", FieldValue::of_string("k")}}).is_ok());
}

TEST(QueueArgumentsTest, StreamTakesRetentionAndRefusesWhatDestructiveQueuesDo) {
  FieldTable stream{{"x-queue-type", FieldValue::of_string("stream")},
                    {"x-max-length-bytes", FieldValue::of_int(1 << 20)},
                    {"x-max-age", FieldValue::of_string("7D")}};
  auto args = parse_queue_arguments(stream);
  ASSERT_TRUE(args.is_ok()) << args.status().to_string();
  EXPECT_TRUE(args->stream);
  EXPECT_EQ(args->stream_max_bytes, 1 << 20);
  EXPECT_EQ(args->stream_max_age_ms, 7LL * 24 * 3600 * 1000);
  // Retention, not a queue length limit.
  EXPECT_FALSE(args->bounded());
  auto plain = parse_queue_arguments({{"x-queue-type", FieldValue::of_string("stream")}});
  ASSERT_TRUE(plain.is_ok());
  EXPECT_EQ(plain->stream_max_bytes, -1);
  EXPECT_EQ(plain->stream_max_age_ms, -1);
  for (const char* refused : {"x-message-ttl", "x-max-length", "x-expires", "x-max-priority"}) {
    EXPECT_FALSE(parse_queue_arguments({{"x-queue-type", FieldValue::of_string("stream")},
                                        {refused, FieldValue::of_int(5)}})
                     .is_ok())
        << refused;
  }
  EXPECT_FALSE(parse_queue_arguments({{"x-queue-type", FieldValue::of_string("stream")},
                                      {"x-max-age", FieldValue::of_string("forever")}})
                   .is_ok());
  EXPECT_FALSE(parse_queue_arguments({{"x-queue-type", FieldValue::of_string("ring")}}).is_ok());
}

TEST(QueueArgumentsTest, AgesHaveOneUnit) {
  EXPECT_EQ(*parse_age("1Y"), 365LL * 24 * 3600 * 1000);
  EXPECT_EQ(*parse_age("2M"), 60LL * 24 * 3600 * 1000);
  EXPECT_EQ(*parse_age("12h"), 12LL * 3600 * 1000);
  EXPECT_EQ(*parse_age("30m"), 30LL * 60 * 1000);
  EXPECT_EQ(*parse_age("10s"), 10000);
  for (const char* bad : {"", "s", "0s", "10", "10w", "-5s", "1.5h", "99999999999999999999Y"}) {
    EXPECT_FALSE(parse_age(bad).is_ok()) << bad;
  }
}

TEST(QueueArgumentsTest, StreamOffsetsReadEveryForm) {
  using Kind = StreamStart::Kind;
  const int64_t now = 1'000'000'000;
  EXPECT_EQ(parse_stream_offset(nullptr, now)->kind, Kind::kNext);
  FieldValue text = FieldValue::of_string("first");
  EXPECT_EQ(parse_stream_offset(&text, now)->kind, Kind::kFirst);
  text = FieldValue::of_string("last");
  EXPECT_EQ(parse_stream_offset(&text, now)->kind, Kind::kLast);
  text = FieldValue::of_string("next");
  EXPECT_EQ(parse_stream_offset(&text, now)->kind, Kind::kNext);
  text = FieldValue::of_string("1m");
  auto age = parse_stream_offset(&text, now);
  EXPECT_EQ(age->kind, Kind::kTime);
  EXPECT_EQ(age->value, now - 60000);
  FieldValue offset = FieldValue::of_int(42);
  offset.type = 'I';
  EXPECT_EQ(parse_stream_offset(&offset, now)->kind, Kind::kOffset);
  EXPECT_EQ(parse_stream_offset(&offset, now)->value, 42);
  FieldValue stamp = FieldValue::of_int(1700000000);
  stamp.type = 'T';
  EXPECT_EQ(parse_stream_offset(&stamp, now)->kind, Kind::kTime);
  EXPECT_EQ(parse_stream_offset(&stamp, now)->value, 1700000000000LL);
  FieldValue flag = FieldValue::of_bool(true);
  EXPECT_FALSE(parse_stream_offset(&flag, now).is_ok());
  text = FieldValue::of_string("sideways");
  EXPECT_FALSE(parse_stream_offset(&text, now).is_ok());
}

}  // namespace
}  // namespace magnetar::protocol::amqp
