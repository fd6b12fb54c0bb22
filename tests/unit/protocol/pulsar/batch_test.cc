#include "protocol/pulsar/batch.h"

#include <gtest/gtest.h>

#include <string>

#include "protocol/pulsar/commands.h"
#include "protocol/pulsar/frame.h"

namespace magnetar::protocol::pulsar {
namespace {

using common::Slice;

proto::SingleMessageMetadata single(std::string key) {
  proto::SingleMessageMetadata m;
  if (!key.empty()) m.set_partition_key(std::move(key));
  return m;
}

TEST(BatchTest, OneMessageBatchMatchesHandWrittenBytes) {
  BatchBuilder builder;
  builder.add(single(""), "hello");
  EXPECT_EQ(builder.count(), 1);
  Slice batch = builder.finish();
  // size 2 | {payload_size: 5} | "hello"
  EXPECT_EQ(batch.to_string(), std::string("\x00\x00\x00\x02\x18\x05hello", 11));
  EXPECT_EQ(builder.count(), 0);
}

TEST(BatchTest, BuildThenReadBack) {
  BatchBuilder builder;
  auto first = single("k1");
  auto* prop = first.add_properties();
  prop->set_key("a");
  prop->set_value("b");
  first.set_event_time(99);
  builder.add(first, "one");
  builder.add(single("k2"), "");
  builder.add(single(""), std::string(5000, 'x'));
  ASSERT_EQ(builder.count(), 3);
  Slice batch = builder.finish();
  EXPECT_EQ(builder.size_bytes(), 0u);  // ready for the next batch

  BatchReader reader(batch, 3);
  BatchMessage m;
  ASSERT_TRUE(reader.next(&m));
  EXPECT_EQ(m.metadata.partition_key(), "k1");
  EXPECT_EQ(m.metadata.properties(0).value(), "b");
  EXPECT_EQ(m.metadata.event_time(), 99u);
  EXPECT_EQ(m.metadata.payload_size(), 3);
  EXPECT_EQ(m.payload.to_string(), "one");
  EXPECT_EQ(m.payload.buffer(), batch.buffer());  // a view, not a copy
  ASSERT_TRUE(reader.next(&m));
  EXPECT_EQ(m.metadata.partition_key(), "k2");
  EXPECT_TRUE(m.payload.empty());
  ASSERT_TRUE(reader.next(&m));
  EXPECT_FALSE(m.metadata.has_partition_key());
  EXPECT_EQ(m.payload.size(), 5000u);
  EXPECT_FALSE(reader.next(&m));
  EXPECT_TRUE(reader.status().is_ok()) << reader.status().to_string();
  EXPECT_EQ(reader.index(), 3);
}

TEST(BatchTest, BatchTravelsInASendFrame) {
  BatchBuilder builder;
  for (int i = 0; i < 10; ++i) builder.add(single("key-" + std::to_string(i)), "value-" + std::to_string(i));
  proto::MessageMetadata meta;
  meta.set_producer_name("p");
  meta.set_sequence_id(0);
  meta.set_publish_time(1);
  meta.set_num_messages_in_batch(builder.count());
  proto::BaseCommand send;
  send.set_type(proto::BaseCommand::SEND);
  send.mutable_send()->set_producer_id(1);
  send.mutable_send()->set_sequence_id(0);
  send.mutable_send()->set_num_messages(builder.count());
  Slice batch = builder.finish();
  Slice frame = encode_payload_command(send, meta, batch.view());

  Frame out;
  common::Status why;
  ASSERT_EQ(decode_frame(frame, {}, &out, &why), DecodeResult::kFrame);
  auto messages = split_batch(out.payload, out.metadata.num_messages_in_batch());
  ASSERT_TRUE(messages.is_ok()) << messages.status().to_string();
  ASSERT_EQ(messages->size(), 10u);
  EXPECT_EQ((*messages)[7].metadata.partition_key(), "key-7");
  EXPECT_EQ((*messages)[7].payload.to_string(), "value-7");
  EXPECT_EQ((*messages)[7].payload.buffer(), frame.buffer());
}

TEST(BatchTest, MalformedBatchesAreRefused) {
  BatchBuilder builder;
  builder.add(single("a"), "xyz");
  builder.add(single("b"), "uvw");
  const std::string good = builder.finish().to_string();

  // More messages claimed than present.
  auto r = split_batch(Slice::copy_of(good), 3);
  EXPECT_FALSE(r.is_ok());
  // Fewer claimed: bytes left over.
  r = split_batch(Slice::copy_of(good), 1);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("follow the last"), std::string::npos) << r.status().message();
  // Negative count.
  EXPECT_FALSE(split_batch(Slice::copy_of(good), -1).is_ok());
  // Truncated at every length.
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(split_batch(Slice::copy_of(good.substr(0, n)), 2).is_ok()) << "cut at " << n;
  }
  // payload_size larger than what is left.
  std::string big = good;
  big[big.size() - 4] = 0x7f;  // the second message's payload_size varint
  EXPECT_FALSE(split_batch(Slice::copy_of(big), 2).is_ok());
  // Garbage metadata.
  std::string junk("\x00\x00\x00\x02\xff\xff", 6);
  EXPECT_FALSE(split_batch(Slice::copy_of(junk), 1).is_ok());
  // An empty batch of zero messages is fine.
  auto empty = split_batch(Slice(), 0);
  ASSERT_TRUE(empty.is_ok());
  EXPECT_TRUE(empty->empty());
}

}  // namespace
}  // namespace magnetar::protocol::pulsar
