#include "protocol/amqp/convert.h"

#include <gtest/gtest.h>

#include "protocol/pulsar/batch.h"
#include "protocol/pulsar/frame.h"

namespace magnetar::protocol::amqp {
namespace {

using common::Slice;
namespace proto = pulsar::proto;

ContentHeader header_with(const BasicProperties& p) {
  WireWriter w;
  encode_properties(w, p);
  ContentHeader h;
  h.properties = p;
  h.raw_properties = w.finish();
  return h;
}

TEST(AmqpConvertTest, AnAmqpMessageComesBackExactlyAndPulsarSeesItsHeaders) {
  BasicProperties p;
  p.content_type = "text/plain";
  p.delivery_mode = 2;
  p.timestamp = 1700000000;
  p.headers = FieldTable{{"trace", FieldValue::of_string("t-1")}, {"n", FieldValue::of_int(7)}};
  ContentHeader h = header_with(p);
  PublishedEntry e = message_to_entry("orders-x", "order.created", h, "body", 42, "amqp-p", 3);
  EXPECT_EQ(e.header.key, "order.created");
  EXPECT_EQ(e.header.messages, 1u);
  // What a Pulsar consumer reads.
  proto::MessageMetadata md;
  Slice payload;
  ASSERT_TRUE(pulsar::parse_entry(e.entry, true, &md, &payload).is_ok());
  EXPECT_EQ(payload.view(), "body");
  EXPECT_EQ(md.partition_key(), "order.created");
  EXPECT_EQ(md.event_time(), 1700000000000u);
  std::map<std::string, std::string> props;
  for (const auto& kv : md.properties()) props[kv.key()] = kv.value();
  EXPECT_EQ(props["trace"], "t-1");
  EXPECT_EQ(props["n"], "7");
  EXPECT_EQ(props["amqp.exchange"], "orders-x");
  // What an AMQP consumer reads.
  std::vector<AmqpMessage> out;
  ASSERT_TRUE(entry_to_messages(e.entry, &out).is_ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].exchange, "orders-x");
  EXPECT_EQ(out[0].routing_key, "order.created");
  EXPECT_EQ(out[0].body.view(), "body");
  EXPECT_EQ(out[0].properties.view(), h.raw_properties.view());
}

TEST(AmqpConvertTest, PulsarBatchesBecomeOneMessageEachWithPropertiesAsHeaders) {
  pulsar::BatchBuilder b;
  for (const char* key : {"k1", "k2"}) {
    proto::SingleMessageMetadata single;
    single.set_partition_key(key);
    auto* kv = single.add_properties();
    kv->set_key("origin");
    kv->set_value("pulsar");
    b.add(std::move(single), std::string("value-") + key);
  }
  proto::MessageMetadata md;
  md.set_producer_name("p");
  md.set_sequence_id(0);
  md.set_publish_time(1);
  md.set_num_messages_in_batch(b.count());
  Slice entry = pulsar::encode_entry(md, b.finish().view());
  std::vector<AmqpMessage> out;
  ASSERT_TRUE(entry_to_messages(entry, &out).is_ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].routing_key, "k2");
  EXPECT_EQ(out[1].body.view(), "value-k2");
  auto props = decode_properties(out[1].properties);
  ASSERT_TRUE(props.is_ok());
  ASSERT_TRUE(props->headers.has_value());
  EXPECT_EQ(*props->headers, (FieldTable{{"origin", FieldValue::of_string("pulsar")}}));
}

TEST(AmqpConvertTest, GarbageEntriesAreRefused) {
  std::vector<AmqpMessage> out;
  EXPECT_FALSE(entry_to_messages(Slice::copy_of("not an entry"), &out).is_ok());
  EXPECT_TRUE(out.empty());
}

TEST(AmqpConvertTest, ChunksOfAChunkedPulsarMessageAreRefusedNotDeliveredRaw) {
  proto::MessageMetadata md;
  md.set_producer_name("p");
  md.set_sequence_id(0);
  md.set_publish_time(1);
  md.set_uuid("p-0");
  md.set_chunk_id(0);
  md.set_num_chunks_from_msg(2);
  md.set_total_chunk_msg_size(8);
  std::vector<AmqpMessage> out;
  common::Status st = entry_to_messages(pulsar::encode_entry(md, "half"), &out);
  EXPECT_EQ(st.code(), common::ErrorCode::kUnimplemented);
  EXPECT_NE(st.message().find("p-0"), std::string::npos);
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace magnetar::protocol::amqp
