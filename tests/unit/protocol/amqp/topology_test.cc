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

}  // namespace
}  // namespace magnetar::protocol::amqp
