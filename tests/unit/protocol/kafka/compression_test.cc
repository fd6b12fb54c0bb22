#include "protocol/kafka/compression.h"

#include <gtest/gtest.h>
#include <lz4frame.h>
#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <string>

#include "common/crc32c.h"

namespace magnetar::protocol::kafka {
namespace {

using common::Slice;

std::string gzip(const std::string& in) {
  z_stream s{};
  deflateInit2(&s, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);  // 16: gzip header
  std::string out(deflateBound(&s, in.size()) + 32, '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  s.avail_in = static_cast<uInt>(in.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = static_cast<uInt>(out.size());
  deflate(&s, Z_FINISH);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

std::string xerial(const std::string& in) {
  std::string out("\x82SNAPPY\0\0\0\0\1\0\0\0\1", 16);
  for (size_t at = 0; at < in.size(); at += 1000) {  // several blocks
    std::string block;
    snappy::Compress(in.data() + at, std::min<size_t>(1000, in.size() - at), &block);
    uint32_t n = static_cast<uint32_t>(block.size());
    out += {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8), static_cast<char>(n)};
    out += block;
  }
  return out;
}

std::string lz4_frame(const std::string& in) {
  std::string out(LZ4F_compressFrameBound(in.size(), nullptr), '\0');
  out.resize(LZ4F_compressFrame(out.data(), out.size(), in.data(), in.size(), nullptr));
  return out;
}

std::string zstd(const std::string& in) {
  std::string out(ZSTD_compressBound(in.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3));
  return out;
}

std::string sample() {
  std::string s;
  for (int i = 0; i < 500; ++i) s += "record-" + std::to_string(i) + ";";
  return s;
}

TEST(KafkaCompressionTest, EveryCodecDecodesWhatItsLibraryWrites) {
  const std::string plain = sample();
  std::string raw_snappy;
  snappy::Compress(plain.data(), plain.size(), &raw_snappy);
  const std::pair<Compression, std::string> cases[] = {
      {Compression::kGzip, gzip(plain)},     {Compression::kSnappy, raw_snappy},
      {Compression::kSnappy, xerial(plain)}, {Compression::kLz4, lz4_frame(plain)},
      {Compression::kZstd, zstd(plain)},
  };
  for (const auto& [codec, packed] : cases) {
    auto out = decompress_records(codec, Slice::copy_of(packed));
    ASSERT_TRUE(out.is_ok()) << static_cast<int>(codec) << ": " << out.status().to_string();
    EXPECT_EQ(out->view(), plain) << static_cast<int>(codec);
  }
}

TEST(KafkaCompressionTest, GarbageTruncationAndBombsAreRefused) {
  const std::string plain = sample();
  for (Compression codec : {Compression::kGzip, Compression::kSnappy, Compression::kLz4, Compression::kZstd}) {
    EXPECT_FALSE(decompress_records(codec, Slice::copy_of("not compressed at all")).is_ok()) << static_cast<int>(codec);
  }
  std::string gz = gzip(plain);
  EXPECT_FALSE(decompress_records(Compression::kGzip, Slice::copy_of(gz.substr(0, gz.size() / 2))).is_ok());
  std::string z = zstd(plain);
  EXPECT_FALSE(decompress_records(Compression::kZstd, Slice::copy_of(z.substr(0, z.size() / 2))).is_ok());
  std::string zeros(1 << 20, '\0');
  EXPECT_FALSE(decompress_records(Compression::kZstd, Slice::copy_of(zstd(zeros)), 4096).is_ok());
  EXPECT_FALSE(decompress_records(Compression::kGzip, Slice::copy_of(gzip(zeros)), 4096).is_ok());
  EXPECT_FALSE(decompress_records(static_cast<Compression>(6), Slice::copy_of("x")).is_ok());
}

// A batch as a client writes it: header uncompressed, records section
// compressed, CRC over the compressed bytes.
TEST(KafkaCompressionTest, CompressedBatchParsesToItsRecords) {
  RecordBatch b;
  b.base_timestamp = 1700000000000;
  b.max_timestamp = b.base_timestamp;
  for (int i = 0; i < 3; ++i) {
    Record r;
    r.timestamp = b.base_timestamp;
    r.offset_delta = i;
    r.value = Slice::copy_of("v" + std::to_string(i));
    b.records.push_back(r);
  }
  WireWriter w;
  write_record_batch(w, b);
  std::string plain = w.finish().to_string();
  std::string header = plain.substr(0, kBatchHeaderBytes);
  std::string packed = zstd(plain.substr(kBatchHeaderBytes));
  std::string batch = header + packed;
  uint32_t len = static_cast<uint32_t>(batch.size() - 12);
  batch[8] = static_cast<char>(len >> 24);
  batch[9] = static_cast<char>(len >> 16);
  batch[10] = static_cast<char>(len >> 8);
  batch[11] = static_cast<char>(len);
  batch[22] = static_cast<char>(Compression::kZstd);  // attributes, low byte
  uint32_t crc = common::crc32c::value(batch.data() + 21, batch.size() - 21);
  for (int k = 0; k < 4; ++k) batch[17 + k] = static_cast<char>(crc >> (24 - 8 * k));
  auto parsed = parse_record_set(Slice::copy_of(batch));
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  ASSERT_EQ(parsed->front().records.size(), 3u);
  EXPECT_EQ(parsed->front().compression(), Compression::kZstd);
  EXPECT_EQ(parsed->front().records[2].value->view(), "v2");
}

}  // namespace
}  // namespace magnetar::protocol::kafka
