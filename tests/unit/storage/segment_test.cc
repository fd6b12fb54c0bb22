#include "storage/segment.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "storage_test_util.h"

namespace magnetar::storage {
namespace {

using common::Slice;
using testing::TempDir;

// Appends entry records (ledger 1, ids 0..n-1) and returns their offsets.
std::vector<uint64_t> append_entries(SegmentAppender& seg, int n) {
  std::vector<uint64_t> offsets;
  for (int i = 0; i < n; ++i) {
    std::string payload = testing::entry_payload(1, i);
    uint8_t header[format::kRecordHeaderSize];
    format::encode_record_header(header, format::RecordType::kEntry, 1, i, payload.data(),
                                 static_cast<uint32_t>(payload.size()));
    iovec iov[2] = {{header, sizeof(header)}, {payload.data(), payload.size()}};
    offsets.push_back(seg.size());
    EXPECT_TRUE(seg.append(iov, 2, sizeof(header) + payload.size()).is_ok());
  }
  return offsets;
}

std::vector<int64_t> scan_ids(const std::string& dir, uint64_t id, ScanResult* result) {
  std::vector<int64_t> ids;
  auto r = scan_segment(dir, id, 0, [&](const ScannedRecord& rec) { ids.push_back(rec.header.entry); });
  EXPECT_TRUE(r.is_ok());
  if (r) *result = *r;
  return ids;
}

TEST(SegmentTest, CreateWritesAHeaderAndRefusesAnExistingFile) {
  TempDir dir;
  auto seg = SegmentAppender::create(dir.path(), 1);
  ASSERT_TRUE(seg.is_ok()) << seg.status().to_string();
  EXPECT_EQ((*seg)->size(), format::kFileHeaderSize);
  EXPECT_FALSE(SegmentAppender::create(dir.path(), 1).is_ok());
  auto ids = list_segments(dir.path());
  ASSERT_TRUE(ids.is_ok());
  EXPECT_EQ(*ids, std::vector<uint64_t>{1});
}

TEST(SegmentTest, ListsSegmentsInOrderAndIgnoresOtherFiles) {
  TempDir dir;
  for (uint64_t id : {3, 1, 20}) ASSERT_TRUE(SegmentAppender::create(dir.path(), id).is_ok());
  FILE* f = std::fopen((dir.path() + "/notes.txt").c_str(), "w");
  std::fclose(f);
  auto ids = list_segments(dir.path());
  ASSERT_TRUE(ids.is_ok());
  EXPECT_EQ(*ids, (std::vector<uint64_t>{1, 3, 20}));
}

TEST(SegmentTest, RecordsReadBackThroughTheirOffsets) {
  TempDir dir;
  auto seg = SegmentAppender::create(dir.path(), 1);
  ASSERT_TRUE(seg.is_ok());
  auto offsets = append_entries(**seg, 50);
  auto reader = SegmentReader::open(dir.path(), 1);
  ASSERT_TRUE(reader.is_ok());
  for (int i = 0; i < 50; ++i) {
    std::string payload = testing::entry_payload(1, i);
    auto bytes = (*reader)->read(offsets[i], format::kRecordHeaderSize + payload.size());
    ASSERT_TRUE(bytes.is_ok());
    auto got = decode_entry_record(*bytes, 1, i);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    EXPECT_EQ(got->to_string(), payload);
    // The same bytes are not entry i of another ledger, nor another entry.
    EXPECT_EQ(decode_entry_record(*bytes, 2, i).status().code(), common::ErrorCode::kCorruption);
    EXPECT_EQ(decode_entry_record(*bytes, 1, i + 1).status().code(), common::ErrorCode::kCorruption);
  }
}

TEST(SegmentTest, ReadingPastTheEndIsCorruption) {
  TempDir dir;
  auto seg = SegmentAppender::create(dir.path(), 1);
  ASSERT_TRUE(seg.is_ok());
  auto reader = SegmentReader::open(dir.path(), 1);
  ASSERT_TRUE(reader.is_ok());
  EXPECT_EQ((*reader)->read(format::kFileHeaderSize, 100).status().code(), common::ErrorCode::kCorruption);
}

TEST(SegmentTest, ScanStopsAtATornTail) {
  TempDir dir;
  auto seg = SegmentAppender::create(dir.path(), 1);
  ASSERT_TRUE(seg.is_ok());
  auto offsets = append_entries(**seg, 10);
  uint64_t full = (*seg)->size();
  // Cut the last record in half: a write the crash interrupted.
  std::string path = segment_path(dir.path(), 1);
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(full - 30)), 0);
  ScanResult result;
  auto ids = scan_ids(dir.path(), 1, &result);
  EXPECT_EQ(ids.size(), 9u);
  EXPECT_TRUE(result.header_ok);
  EXPECT_EQ(result.valid_end, offsets[9]);
  EXPECT_EQ(result.file_size, full - 30);
}

TEST(SegmentTest, ScanGoesOnPastACorruptRecord) {
  TempDir dir;
  auto seg = SegmentAppender::create(dir.path(), 1);
  ASSERT_TRUE(seg.is_ok());
  auto offsets = append_entries(**seg, 10);
  const uint64_t full = (*seg)->size();
  std::string path = segment_path(dir.path(), 1);
  FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::fseek(f, static_cast<long>(offsets[4] + format::kRecordHeaderSize + 3), SEEK_SET);
  std::fputc(0xff, f);
  std::fclose(f);
  ScanResult result;
  auto ids = scan_ids(dir.path(), 1, &result);
  // Damage is not the end: the good records after it are kept.
  EXPECT_EQ(ids, (std::vector<int64_t>{0, 1, 2, 3, 5, 6, 7, 8, 9}));
  EXPECT_EQ(result.valid_end, full);
  ASSERT_EQ(result.damaged.size(), 1u);
  EXPECT_EQ(result.damaged[0].offset, offsets[4]);
  EXPECT_EQ(result.damaged[0].size, offsets[5] - offsets[4]);
}

TEST(SegmentTest, ScanGoesOnPastOverwrittenBytesAcrossRecords) {
  TempDir dir;
  auto seg = SegmentAppender::create(dir.path(), 1);
  ASSERT_TRUE(seg.is_ok());
  auto offsets = append_entries(**seg, 30);
  const uint64_t full = (*seg)->size();
  // 16 bytes across the boundary of records 10 and 11 (headers included).
  std::string path = segment_path(dir.path(), 1);
  FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::fseek(f, static_cast<long>(offsets[11] - 8), SEEK_SET);
  for (int i = 0; i < 16; ++i) std::fputc(0xa5, f);
  std::fclose(f);
  ScanResult result;
  auto ids = scan_ids(dir.path(), 1, &result);
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 30; ++i) {
    if (i != 10 && i != 11) expected.push_back(i);
  }
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(result.valid_end, full);
  ASSERT_EQ(result.damaged.size(), 1u);
  EXPECT_EQ(result.damaged[0].offset, offsets[10]);
  EXPECT_EQ(result.damaged[0].size, offsets[12] - offsets[10]);
}

TEST(SegmentTest, ATornTailAfterDamageIsStillATornTail) {
  TempDir dir;
  auto seg = SegmentAppender::create(dir.path(), 1);
  ASSERT_TRUE(seg.is_ok());
  auto offsets = append_entries(**seg, 10);
  const uint64_t full = (*seg)->size();
  std::string path = segment_path(dir.path(), 1);
  FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::fseek(f, static_cast<long>(offsets[3] + 5), SEEK_SET);
  std::fputc(0x11, f);
  std::fclose(f);
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(full - 30)), 0);
  ScanResult result;
  auto ids = scan_ids(dir.path(), 1, &result);
  EXPECT_EQ(ids, (std::vector<int64_t>{0, 1, 2, 4, 5, 6, 7, 8}));
  EXPECT_EQ(result.valid_end, offsets[9]);
  ASSERT_EQ(result.damaged.size(), 1u);
}

TEST(SegmentTest, ScanOfAFileWithoutHeaderFindsNothing) {
  TempDir dir;
  std::string path = segment_path(dir.path(), 5);
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fputs("short", f);
  std::fclose(f);
  ScanResult result;
  auto ids = scan_ids(dir.path(), 5, &result);
  EXPECT_TRUE(ids.empty());
  EXPECT_FALSE(result.header_ok);
}

TEST(SegmentTest, ScanFromAnOffsetSkipsWhatCameBefore) {
  TempDir dir;
  auto seg = SegmentAppender::create(dir.path(), 1);
  ASSERT_TRUE(seg.is_ok());
  auto offsets = append_entries(**seg, 10);
  std::vector<int64_t> ids;
  auto r = scan_segment(dir.path(), 1, offsets[6], [&](const ScannedRecord& rec) { ids.push_back(rec.header.entry); });
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(ids, (std::vector<int64_t>{6, 7, 8, 9}));
}

TEST(SegmentTest, ReopenCutsTheTailAndAppendsAfterIt) {
  TempDir dir;
  uint64_t valid_end = 0;
  {
    auto seg = SegmentAppender::create(dir.path(), 1);
    ASSERT_TRUE(seg.is_ok());
    auto offsets = append_entries(**seg, 5);
    valid_end = offsets[4];
  }
  auto seg = SegmentAppender::reopen(dir.path(), 1, valid_end);
  ASSERT_TRUE(seg.is_ok());
  EXPECT_EQ((*seg)->size(), valid_end);
  std::string payload = "after";
  uint8_t header[format::kRecordHeaderSize];
  format::encode_record_header(header, format::RecordType::kEntry, 1, 4, payload.data(), 5);
  iovec iov[2] = {{header, sizeof(header)}, {payload.data(), payload.size()}};
  ASSERT_TRUE((*seg)->append(iov, 2, sizeof(header) + 5).is_ok());
  ASSERT_TRUE((*seg)->sync().is_ok());
  ScanResult result;
  auto ids = scan_ids(dir.path(), 1, &result);
  EXPECT_EQ(ids, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(result.valid_end, result.file_size);
}

TEST(SegmentTest, AppendOfManyIovecsCrossesIovMax) {
  TempDir dir;
  auto seg = SegmentAppender::create(dir.path(), 1);
  ASSERT_TRUE(seg.is_ok());
  std::vector<std::string> parts(3000, std::string(7, 'a'));
  std::vector<iovec> iov;
  for (auto& p : parts) iov.push_back(iovec{p.data(), p.size()});
  ASSERT_TRUE((*seg)->append(iov.data(), iov.size(), 3000 * 7).is_ok());
  EXPECT_EQ((*seg)->size(), format::kFileHeaderSize + 3000 * 7);
}

}  // namespace
}  // namespace magnetar::storage
