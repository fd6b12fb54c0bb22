// The Pulsar codec of topic compaction (protocol/pulsar/server/compaction_codec.h):
// keys and tombstones of stored entries, and batches rewritten with
// compacted_out, read back by a Kafka fetch with an offset gap.
#include "protocol/pulsar/server/compaction_codec.h"

#include <gtest/gtest.h>

#include "protocol/kafka/convert.h"
#include "protocol/kafka/record_batch.h"
#include "protocol/pulsar/batch.h"
#include "protocol/pulsar/frame.h"

namespace magnetar::protocol::pulsar {
namespace {

using common::Slice;

// A batch of (key, value) messages; a null key or value as Kafka sends them.
Slice batch_entry(const std::vector<std::pair<const char*, const char*>>& messages) {
  BatchBuilder b;
  for (const auto& [key, value] : messages) {
    proto::SingleMessageMetadata md;
    if (key != nullptr) {
      md.set_partition_key(key);
    } else {
      md.set_null_partition_key(true);
    }
    if (value == nullptr) md.set_null_value(true);
    b.add(std::move(md), value == nullptr ? "" : value);
  }
  proto::MessageMetadata md;
  md.set_producer_name("p");
  md.set_sequence_id(0);
  md.set_publish_time(1);
  md.set_num_messages_in_batch(b.count());
  Slice payload = b.finish();
  return encode_entry(md, payload.view());
}

TEST(PulsarCompactionCodecTest, ReadsKeysAndTombstonesOfABatch) {
  PulsarCompactionCodec codec;
  auto messages = codec.messages(batch_entry({{"a", "1"}, {"b", nullptr}, {nullptr, "x"}, {"c", ""}}));
  ASSERT_TRUE(messages.is_ok()) << messages.status().to_string();
  ASSERT_EQ(messages->size(), 4u);
  EXPECT_TRUE((*messages)[0].has_key);
  EXPECT_EQ((*messages)[0].key, "a");
  EXPECT_FALSE((*messages)[0].tombstone);
  EXPECT_TRUE((*messages)[1].tombstone);
  EXPECT_FALSE((*messages)[2].has_key);
  EXPECT_TRUE((*messages)[3].tombstone);  // an empty payload with a key
}

TEST(PulsarCompactionCodecTest, ARewrittenBatchKeepsItsPlacesAndKafkaSeesAGap) {
  PulsarCompactionCodec codec;
  Slice entry = batch_entry({{"a", "old"}, {"b", "live"}, {"a", "obscured"}});
  auto kept = codec.keep_only(entry, {false, true, false});
  ASSERT_TRUE(kept.is_ok()) << kept.status().to_string();
  auto again = codec.messages(*kept);
  ASSERT_TRUE(again.is_ok());
  ASSERT_EQ(again->size(), 3u);
  EXPECT_TRUE((*again)[0].compacted_out);
  EXPECT_FALSE((*again)[1].compacted_out);
  EXPECT_TRUE((*again)[2].compacted_out);

  ledger::MessageHeader header;
  header.messages = 3;
  header.first_index = 100;
  kafka::WireWriter out;
  ASSERT_TRUE(kafka::append_entry_as_batch(header, *kept, out).is_ok());
  auto batches = kafka::parse_record_set(out.finish());
  ASSERT_TRUE(batches.is_ok());
  ASSERT_EQ(batches->size(), 1u);
  const kafka::RecordBatch& b = batches->front();
  EXPECT_EQ(b.base_offset, 100);
  EXPECT_EQ(b.last_offset_delta, 2);  // the batch still spans offsets 100..102
  ASSERT_EQ(b.records.size(), 1u);
  EXPECT_EQ(b.records[0].offset_delta, 1);
  EXPECT_EQ(b.records[0].value->view(), "live");
}

}  // namespace
}  // namespace magnetar::protocol::pulsar
