#include "protocol/kafka/record_batch.h"

#include <gtest/gtest.h>

namespace magnetar::protocol::kafka {
namespace {

using common::Slice;

RecordBatch sample_batch() {
  RecordBatch b;
  b.base_offset = 0;
  b.base_timestamp = 1700000000000;
  b.max_timestamp = 1700000000005;
  Record a;
  a.timestamp = 1700000000000;
  a.offset_delta = 0;
  a.key = Slice::copy_of("k1");
  a.value = Slice::copy_of("hello");
  a.headers.push_back({"h", Slice::copy_of("v")});
  a.headers.push_back({"nil", std::nullopt});
  Record c;
  c.timestamp = 1700000000005;
  c.offset_delta = 1;
  c.value = std::nullopt;  // a tombstone, without key
  b.records = {a, c};
  return b;
}

Slice encode(const RecordBatch& b) {
  WireWriter w;
  write_record_batch(w, b);
  return w.finish();
}

TEST(RecordBatchTest, RoundTripKeepsKeysValuesHeadersAndTimestamps) {
  auto parsed = parse_record_set(encode(sample_batch()));
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  ASSERT_EQ(parsed->size(), 1u);
  const RecordBatch& b = parsed->front();
  ASSERT_EQ(b.records.size(), 2u);
  EXPECT_EQ(b.records[0].key->view(), "k1");
  EXPECT_EQ(b.records[0].value->view(), "hello");
  ASSERT_EQ(b.records[0].headers.size(), 2u);
  EXPECT_EQ(b.records[0].headers[0].key, "h");
  EXPECT_EQ(b.records[0].headers[0].value->view(), "v");
  EXPECT_FALSE(b.records[0].headers[1].value.has_value());
  EXPECT_FALSE(b.records[1].key.has_value());
  EXPECT_FALSE(b.records[1].value.has_value());
  EXPECT_EQ(b.records[1].timestamp, 1700000000005);
  EXPECT_EQ(b.records[1].offset_delta, 1);
}

TEST(RecordBatchTest, SeveralBatchesInOneRecordSet) {
  WireWriter w;
  write_record_batch(w, sample_batch());
  write_record_batch(w, sample_batch());
  auto parsed = parse_record_set(w.finish());
  ASSERT_TRUE(parsed.is_ok());
  EXPECT_EQ(parsed->size(), 2u);
}

TEST(RecordBatchTest, AFlippedBitFailsTheCrc) {
  Slice s = encode(sample_batch());
  s.mutable_data()[s.size() - 3] ^= 0x01;
  auto parsed = parse_record_set(s);
  ASSERT_FALSE(parsed.is_ok());
  EXPECT_NE(parsed.status().message().find("CRC32C"), std::string::npos);
}

TEST(RecordBatchTest, OldMagicAndCompressionAreRefused) {
  Slice s = encode(sample_batch());
  s.mutable_data()[16] = 1;  // magic
  EXPECT_FALSE(parse_record_set(s).is_ok());

  // The gzip bit on records that are not gzip (the CRC is wrong too).
  Slice g = encode(sample_batch());
  g.mutable_data()[22] = 1;
  EXPECT_FALSE(parse_record_set(g).is_ok());
}

TEST(RecordBatchTest, TruncatedAndOversizedLengthsAreRefused) {
  Slice s = encode(sample_batch());
  for (size_t n : {size_t{1}, size_t{20}, size_t{61}, s.size() - 1}) {
    EXPECT_FALSE(parse_record_set(s.sub(0, n)).is_ok()) << n;
  }
  Slice big = Slice::copy_of(s.view());
  big.mutable_data()[8] = 0x7f;  // batchLength far past the end
  EXPECT_FALSE(parse_record_set(big).is_ok());
}

}  // namespace
}  // namespace magnetar::protocol::kafka
