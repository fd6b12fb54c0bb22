#include "protocol/amqp/properties.h"

#include <gtest/gtest.h>

namespace magnetar::protocol::amqp {
namespace {

using common::Slice;

BasicProperties full() {
  BasicProperties p;
  p.content_type = "application/json";
  p.content_encoding = "gzip";
  p.headers = FieldTable{{"x-trace", FieldValue::of_string("abc")}, {"n", FieldValue::of_int(5)}};
  p.delivery_mode = 2;
  p.priority = 9;
  p.correlation_id = "corr";
  p.reply_to = "replies";
  p.expiration = "60000";
  p.message_id = "m-1";
  p.timestamp = 1700000000;
  p.type = "order.created";
  p.user_id = "guest";
  p.app_id = "shop";
  p.cluster_id = "c";
  return p;
}

TEST(AmqpPropertiesTest, ContentHeaderRoundTripsAndKeepsTheRawProperties) {
  WireWriter props;
  encode_properties(props, full());
  Slice raw = props.finish();
  WireWriter w;
  encode_content_header(w, 12345, raw.view());
  auto h = decode_content_header(w.finish());
  ASSERT_TRUE(h.is_ok()) << h.status().message();
  EXPECT_EQ(h->class_id, 60);
  EXPECT_EQ(h->body_size, 12345u);
  EXPECT_EQ(h->properties, full());
  EXPECT_EQ(h->raw_properties.view(), raw.view());
}

TEST(AmqpPropertiesTest, OnlyFlaggedPropertiesAreWritten) {
  BasicProperties p;
  p.delivery_mode = 2;
  WireWriter w;
  encode_properties(w, p);
  EXPECT_EQ(w.finish().to_string(), std::string("\x10\x00\x02", 3));
  auto back = decode_properties(Slice::copy_of(std::string("\x10\x00\x02", 3)));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back->delivery_mode, 2);
  EXPECT_FALSE(back->content_type.has_value());
}

TEST(AmqpPropertiesTest, GarbageIsRefused) {
  // Continuation flag set.
  EXPECT_FALSE(decode_properties(Slice::copy_of(std::string("\x00\x01", 2))).is_ok());
  // content-type flagged but missing.
  EXPECT_FALSE(decode_properties(Slice::copy_of(std::string("\x80\x00", 2))).is_ok());
  // A header of another class.
  std::string other("\x00\x3d\x00\x00\0\0\0\0\0\0\0\0\0\0", 14);
  EXPECT_FALSE(decode_content_header(Slice::copy_of(other)).is_ok());
  // Too short for the fixed part.
  EXPECT_FALSE(decode_content_header(Slice::copy_of(std::string("\x00\x3c", 2))).is_ok());
  // Every cut of a valid header fails cleanly.
  WireWriter props;
  encode_properties(props, full());
  WireWriter w;
  encode_content_header(w, 1, props.finish().view());
  Slice whole = w.finish();
  for (size_t cut = 0; cut < whole.size(); ++cut) {
    EXPECT_FALSE(decode_content_header(whole.sub(0, cut)).is_ok()) << cut;
  }
}

}  // namespace
}  // namespace magnetar::protocol::amqp
