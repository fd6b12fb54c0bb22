#include "ledger/entry_codec.h"

#include <gtest/gtest.h>

namespace magnetar::ledger {
namespace {

TEST(EntryCodecTest, HeaderAndPayloadRoundTrip) {
  MessageHeader h;
  h.publish_time_ms = 1234567;
  h.producer = "producer-1";
  h.sequence_id = 42;
  h.messages = 7;
  h.first_index = 1000;
  auto entry = encode_entry(h, common::Slice::copy_of("payload"));
  auto back = decode_entry(entry);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->first.publish_time_ms, 1234567);
  EXPECT_EQ(back->first.producer, "producer-1");
  EXPECT_EQ(back->first.sequence_id, 42);
  EXPECT_EQ(back->first.messages, 7u);
  EXPECT_EQ(back->first.first_index, 1000);
  EXPECT_EQ(back->second.to_string(), "payload");
  EXPECT_EQ(back->first.key, "");
  EXPECT_EQ(back->first.deliver_at_ms, 0);
}

TEST(EntryCodecTest, KeyAndDeliveryTimeRoundTrip) {
  MessageHeader h;
  h.key = "customer-7";
  h.deliver_at_ms = 1'800'000'000'000;
  auto back = decode_entry(encode_entry(h, common::Slice::copy_of("x")));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->first.key, "customer-7");
  EXPECT_EQ(back->first.deliver_at_ms, 1'800'000'000'000);
}

TEST(EntryCodecTest, MalformedEntriesAreCorruption) {
  EXPECT_EQ(decode_entry(common::Slice::copy_of("ab")).status().code(), common::ErrorCode::kCorruption);
  EXPECT_EQ(decode_entry(common::Slice::copy_of(std::string("\xff\0\0\0xxxx", 8))).status().code(),
            common::ErrorCode::kCorruption);
  EXPECT_EQ(decode_entry(common::Slice::copy_of(std::string("\x04\0\0\0xxxx", 8))).status().code(),
            common::ErrorCode::kCorruption);
}

}  // namespace
}  // namespace magnetar::ledger
