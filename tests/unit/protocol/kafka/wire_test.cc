#include "protocol/kafka/wire.h"

#include <gtest/gtest.h>

namespace magnetar::protocol::kafka {
namespace {

TEST(KafkaWireTest, VarintsRoundTripAtTheirBoundaries) {
  WireWriter w;
  const int64_t values[] = {0, 1, -1, 63, -64, 64, 300, -300, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN};
  for (int64_t v : values) w.varint(v);
  w.uvarint(0);
  w.uvarint(127);
  w.uvarint(128);
  w.uvarint(UINT32_MAX);
  WireReader r(w.finish());
  for (int64_t v : values) EXPECT_EQ(r.varlong(), v);
  EXPECT_EQ(r.uvarint(), 0u);
  EXPECT_EQ(r.uvarint(), 127u);
  EXPECT_EQ(r.uvarint(), 128u);
  EXPECT_EQ(r.uvarint(), UINT32_MAX);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.remaining(), 0u);
}

TEST(KafkaWireTest, VarintSizesMatchWhatIsWritten) {
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{100}, int64_t{1} << 40, INT64_MIN}) {
    WireWriter w;
    w.varint(v);
    EXPECT_EQ(w.size(), varint_size(v)) << v;
  }
}

TEST(KafkaWireTest, ClassicAndCompactStringsWithNull) {
  WireWriter w;
  w.string("abc", false);
  w.string(std::nullopt, false);
  w.string("", true);
  w.string(std::nullopt, true);
  w.string("xyz", true);
  WireReader r(w.finish());
  EXPECT_EQ(r.string(false), "abc");
  EXPECT_EQ(r.string(false), std::nullopt);
  EXPECT_EQ(r.string(true), "");
  EXPECT_EQ(r.string(true), std::nullopt);
  EXPECT_EQ(r.string(true), "xyz");
  EXPECT_TRUE(r.ok());
}

TEST(KafkaWireTest, ShortInputFailsInsteadOfReadingPastTheEnd) {
  WireWriter w;
  w.i16(10);  // a string claiming 10 bytes
  w.raw("abc");
  WireReader r(w.finish());
  EXPECT_EQ(r.string(false), std::nullopt);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.i32(), 0);  // later reads are inert
}

TEST(KafkaWireTest, ArrayLengthLargerThanTheInputIsRefused) {
  WireWriter w;
  w.i32(1000000);
  WireReader r(w.finish());
  EXPECT_EQ(r.array_length(false), -1);
  EXPECT_FALSE(r.ok());
}

TEST(KafkaWireTest, OverlongVarintIsRefused) {
  std::string bytes(11, '\xff');
  WireReader r(common::Slice::copy_of(bytes));
  r.uvarlong();
  EXPECT_FALSE(r.ok());
}

TEST(KafkaWireTest, TaggedFieldsAreSkipped) {
  WireWriter w;
  w.uvarint(2);
  w.uvarint(0);
  w.uvarint(3);
  w.raw("abc");
  w.uvarint(7);
  w.uvarint(0);
  w.i32(42);
  WireReader r(w.finish());
  r.skip_tagged_fields();
  EXPECT_EQ(r.i32(), 42);
  EXPECT_TRUE(r.ok());
}

}  // namespace
}  // namespace magnetar::protocol::kafka
