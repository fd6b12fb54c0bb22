#include "storage/record_format.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace magnetar::storage::format {
namespace {

std::vector<uint8_t> make_record(RecordType type, uint64_t ledger, int64_t entry, const std::string& payload) {
  std::vector<uint8_t> rec(kRecordHeaderSize + payload.size());
  encode_record_header(rec.data(), type, ledger, entry, payload.data(), static_cast<uint32_t>(payload.size()));
  std::copy(payload.begin(), payload.end(), rec.begin() + kRecordHeaderSize);
  return rec;
}

TEST(RecordFormatTest, HeaderRoundTrips) {
  auto rec = make_record(RecordType::kEntry, 0x1122334455667788ull, 42, "hello");
  RecordHeader h = decode_record_header(rec.data());
  EXPECT_EQ(h.length, 5u);
  EXPECT_EQ(h.type, RecordType::kEntry);
  EXPECT_EQ(h.ledger, 0x1122334455667788ull);
  EXPECT_EQ(h.entry, 42);
  EXPECT_TRUE(header_plausible(h));
  EXPECT_TRUE(record_checksum_ok(rec.data(), h));
}

TEST(RecordFormatTest, NegativeEntryIdRoundTrips) {
  auto rec = make_record(RecordType::kLedgerClosed, 7, -1, "");
  RecordHeader h = decode_record_header(rec.data());
  EXPECT_EQ(h.entry, -1);
  EXPECT_TRUE(record_checksum_ok(rec.data(), h));
}

TEST(RecordFormatTest, EveryBitFlipIsDetected) {
  auto rec = make_record(RecordType::kEntry, 3, 9, "payload bytes");
  for (size_t byte = 0; byte < rec.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      auto bad = rec;
      bad[byte] ^= static_cast<uint8_t>(1 << bit);
      RecordHeader h = decode_record_header(bad.data());
      bool accepted = header_plausible(h) && h.length == rec.size() - kRecordHeaderSize &&
                      record_checksum_ok(bad.data(), h);
      EXPECT_FALSE(accepted) << "flip of byte " << byte << " bit " << bit;
    }
  }
}

TEST(RecordFormatTest, ZeroedBytesAreNotARecord) {
  std::vector<uint8_t> zeros(kRecordHeaderSize, 0);
  RecordHeader h = decode_record_header(zeros.data());
  EXPECT_FALSE(header_plausible(h));
}

TEST(RecordFormatTest, OversizedLengthIsImplausible) {
  auto rec = make_record(RecordType::kEntry, 1, 1, "x");
  put_u32(rec.data() + 4, kMaxPayloadSize + 1);
  EXPECT_FALSE(header_plausible(decode_record_header(rec.data())));
}

TEST(RecordFormatTest, FileHeaderNamesItsSegment) {
  uint8_t header[kFileHeaderSize];
  encode_file_header(header, 17);
  EXPECT_TRUE(file_header_matches(header, 17));
  EXPECT_FALSE(file_header_matches(header, 18));
  header[0] ^= 1;
  EXPECT_FALSE(file_header_matches(header, 17));
}

}  // namespace
}  // namespace magnetar::storage::format
