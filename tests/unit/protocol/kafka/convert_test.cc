#include "protocol/kafka/convert.h"

#include <gtest/gtest.h>

#include "client/compression.h"
#include "protocol/pulsar/batch.h"
#include "protocol/pulsar/frame.h"

namespace magnetar::protocol::kafka {
namespace {

using common::Slice;
namespace proto = pulsar::proto;

RecordBatch kafka_batch() {
  RecordBatch b;
  Record a;
  a.timestamp = 1700000000123;
  a.key = Slice::copy_of("user-1");
  a.value = Slice::copy_of("{\"n\":1}");
  a.headers.push_back({"trace", Slice::copy_of("abc")});
  Record t;  // tombstone without key
  t.timestamp = 1700000000200;
  t.offset_delta = 1;
  b.records = {a, t};
  return b;
}

TEST(KafkaConvertTest, KafkaBatchBecomesOnePulsarBatchEntry) {
  ConvertedEntry e = batch_to_entry(kafka_batch(), 1700000009999, "kafka-1", 7);
  EXPECT_EQ(e.header.messages, 2u);
  EXPECT_EQ(e.header.key, "user-1");
  EXPECT_EQ(e.header.publish_time_ms, 1700000009999);

  proto::MessageMetadata md;
  Slice payload;
  ASSERT_TRUE(pulsar::parse_entry(e.entry, true, &md, &payload).is_ok());
  EXPECT_EQ(md.producer_name(), "kafka-1");
  EXPECT_EQ(md.sequence_id(), 7u);
  EXPECT_EQ(md.num_messages_in_batch(), 2);
  auto messages = pulsar::split_batch(payload, 2);
  ASSERT_TRUE(messages.is_ok());
  const auto& first = (*messages)[0];
  EXPECT_EQ(first.metadata.partition_key(), "user-1");
  EXPECT_EQ(first.payload.view(), "{\"n\":1}");
  ASSERT_EQ(first.metadata.properties_size(), 1);
  EXPECT_EQ(first.metadata.properties(0).key(), "trace");
  EXPECT_EQ(first.metadata.properties(0).value(), "abc");
  EXPECT_EQ(first.metadata.event_time(), 1700000000123u);
  const auto& second = (*messages)[1];
  EXPECT_TRUE(second.metadata.null_value());
  EXPECT_TRUE(second.metadata.null_partition_key());
}

TEST(KafkaConvertTest, StoredEntryComesBackAsTheSameRecords) {
  ConvertedEntry e = batch_to_entry(kafka_batch(), 1700000009999, "kafka-1", 7);
  e.header.first_index = 41;
  WireWriter w;
  ASSERT_TRUE(append_entry_as_batch(e.header, e.entry, w).is_ok());
  auto parsed = parse_record_set(w.finish());
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  ASSERT_EQ(parsed->size(), 1u);
  const RecordBatch& b = parsed->front();
  EXPECT_EQ(b.base_offset, 41);
  ASSERT_EQ(b.records.size(), 2u);
  EXPECT_EQ(b.records[0].key->view(), "user-1");
  EXPECT_EQ(b.records[0].value->view(), "{\"n\":1}");
  EXPECT_EQ(b.records[0].timestamp, 1700000000123);
  ASSERT_EQ(b.records[0].headers.size(), 1u);
  EXPECT_EQ(b.records[0].headers[0].value->view(), "abc");
  EXPECT_FALSE(b.records[1].key.has_value());
  EXPECT_FALSE(b.records[1].value.has_value());
  EXPECT_EQ(b.records[1].offset_delta, 1);
}

TEST(KafkaConvertTest, APulsarMessageWithoutBatchIsOneRecord) {
  proto::MessageMetadata md;
  md.set_producer_name("pulsar-producer");
  md.set_sequence_id(0);
  md.set_publish_time(1700000000500);
  md.set_partition_key("k");
  auto* kv = md.add_properties();
  kv->set_key("a");
  kv->set_value("b");
  Slice entry = pulsar::encode_entry(md, "payload");
  ledger::MessageHeader h;
  h.first_index = 3;
  WireWriter w;
  ASSERT_TRUE(append_entry_as_batch(h, entry, w).is_ok());
  auto parsed = parse_record_set(w.finish());
  ASSERT_TRUE(parsed.is_ok());
  const Record& r = parsed->front().records.at(0);
  EXPECT_EQ(parsed->front().base_offset, 3);
  EXPECT_EQ(r.key->view(), "k");
  EXPECT_EQ(r.value->view(), "payload");
  EXPECT_EQ(r.timestamp, 1700000000500);  // no event time: the publish time
  EXPECT_EQ(r.headers.at(0).key, "a");
}

TEST(KafkaConvertTest, CompressedPulsarBatchesAreServedDecompressed) {
  pulsar::BatchBuilder builder;
  for (const char* v : {"one", "two", "three"}) {
    proto::SingleMessageMetadata single;
    single.set_partition_key("k");
    builder.add(single, v);
  }
  Slice plain = builder.finish();
  auto packed = client::compress(proto::ZSTD, plain.view());
  ASSERT_TRUE(packed.is_ok());
  proto::MessageMetadata md;
  md.set_producer_name("p");
  md.set_sequence_id(0);
  md.set_publish_time(1700000000000);
  md.set_num_messages_in_batch(3);
  md.set_compression(proto::ZSTD);
  md.set_uncompressed_size(static_cast<uint32_t>(plain.size()));
  ledger::MessageHeader h;
  h.first_index = 10;
  WireWriter w;
  ASSERT_TRUE(append_entry_as_batch(h, pulsar::encode_entry(md, packed->view()), w).is_ok());
  auto parsed = parse_record_set(w.finish());
  ASSERT_TRUE(parsed.is_ok());
  ASSERT_EQ(parsed->front().records.size(), 3u);
  EXPECT_EQ(parsed->front().records[2].value->view(), "three");

  md.set_compression(proto::LZ4);  // the bytes are not LZ4
  WireWriter bad;
  EXPECT_FALSE(append_entry_as_batch(h, pulsar::encode_entry(md, packed->view()), bad).is_ok());
}

TEST(KafkaConvertTest, ChunksOfAChunkedPulsarMessageAreLeftOut) {
  proto::MessageMetadata md;
  md.set_producer_name("p");
  md.set_sequence_id(3);
  md.set_publish_time(1700000000000);
  md.set_uuid("p-3");
  md.set_chunk_id(1);
  md.set_num_chunks_from_msg(4);
  md.set_total_chunk_msg_size(4000);
  ledger::MessageHeader h;
  h.first_index = 7;
  WireWriter w;
  auto r = append_entry_as_batch(h, pulsar::encode_entry(md, std::string(1000, 'c')), w);
  ASSERT_TRUE(r.is_ok());
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->uuid, "p-3");
  EXPECT_EQ((*r)->id, 1);
  EXPECT_EQ((*r)->count, 4);
  EXPECT_EQ(w.size(), 0u);
}

TEST(KafkaConvertTest, SkippedOffsetsAreCoveredByOneControlBatch) {
  WireWriter w;
  write_skip_batch(w, 7, 10, 1700000000000);
  auto parsed = parse_record_set(w.finish());
  ASSERT_TRUE(parsed.is_ok());
  ASSERT_EQ(parsed->size(), 1u);
  EXPECT_EQ(parsed->front().base_offset, 7);
  EXPECT_EQ(parsed->front().last_offset_delta, 3);
  // A control batch: one marker that clients step over, no record for the application.
  EXPECT_EQ(parsed->front().attributes & 0x20, 0x20);
  ASSERT_EQ(parsed->front().records.size(), 1u);
  EXPECT_EQ(parsed->front().records.front().offset_delta, 3);
}

}  // namespace
}  // namespace magnetar::protocol::kafka
