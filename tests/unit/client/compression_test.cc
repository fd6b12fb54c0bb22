#include "client/compression.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <random>

namespace magnetar::client {
namespace {

namespace proto = protocol::pulsar::proto;

std::string sample(size_t n) {
  std::string s;
  std::mt19937 rng(1);
  while (s.size() < n) s += "message-" + std::to_string(rng() % 1000) + " ";
  s.resize(n);
  return s;
}

class CodecTest : public ::testing::TestWithParam<CompressionType> {};

TEST_P(CodecTest, RoundTrips) {
  for (size_t n : {0, 1, 100, 1024, 200000}) {
    std::string in = sample(n);
    auto packed = compress(GetParam(), in);
    ASSERT_TRUE(packed.is_ok()) << packed.status().message();
    if (GetParam() != proto::NONE && n >= 1024) {
      EXPECT_LT(packed->size(), in.size());
    }
    auto plain = decompress(GetParam(), *packed, in.size());
    ASSERT_TRUE(plain.is_ok()) << plain.status().message();
    EXPECT_EQ(plain->view(), in);
  }
}

TEST_P(CodecTest, WrongSizeOrGarbageIsCorruption) {
  std::string in = sample(5000);
  auto packed = compress(GetParam(), in);
  ASSERT_TRUE(packed.is_ok());
  auto wrong = decompress(GetParam(), *packed, in.size() + 1);
  EXPECT_EQ(wrong.status().code(), common::ErrorCode::kCorruption);
  if (GetParam() == proto::NONE) return;
  auto garbage = decompress(GetParam(), common::Slice::copy_of("\xff\xfe\xfd garbage bytes"), 100);
  EXPECT_EQ(garbage.status().code(), common::ErrorCode::kCorruption);
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, CodecTest,
                         ::testing::Values(proto::NONE, proto::LZ4, proto::ZLIB, proto::ZSTD, proto::SNAPPY),
                         [](const auto& info) { return std::string(compression_name(info.param)); });

TEST(CompressionTest, NamesParse) {
  EXPECT_EQ(parse_compression("LZ4"), proto::LZ4);
  EXPECT_EQ(parse_compression("zstd"), proto::ZSTD);
  EXPECT_EQ(parse_compression("Snappy"), proto::SNAPPY);
  EXPECT_EQ(parse_compression("none"), proto::NONE);
  EXPECT_FALSE(parse_compression("brotli").has_value());
}

// The formats are the ones other Pulsar clients write: decoding bytes
// produced independently of our compress() proves it.
TEST(CompressionTest, ReadsAZlibStreamFromZlibItself) {
  std::string in = sample(3000);
  uLongf len = compressBound(in.size());
  std::string out(len, '\0');
  ASSERT_EQ(compress2(reinterpret_cast<Bytef*>(out.data()), &len, reinterpret_cast<const Bytef*>(in.data()), in.size(), 9),
            Z_OK);
  out.resize(len);
  EXPECT_EQ(static_cast<uint8_t>(out[0]), 0x78);  // zlib header, not raw deflate or gzip
  auto plain = decompress(proto::ZLIB, common::Slice::copy_of(out), in.size());
  ASSERT_TRUE(plain.is_ok());
  EXPECT_EQ(plain->view(), in);
}

TEST(CompressionTest, Lz4IsTheBlockFormatWithoutFrameHeader) {
  // A hand-made LZ4 block: one sequence of 5 literals "hello" and no match
  // (token 0x50). A frame would start with the magic 04 22 4D 18.
  std::string block = "\x50hello";
  auto plain = decompress(proto::LZ4, common::Slice::copy_of(block), 5);
  ASSERT_TRUE(plain.is_ok()) << plain.status().message();
  EXPECT_EQ(plain->view(), "hello");
  auto packed = compress(proto::LZ4, "hello");
  ASSERT_TRUE(packed.is_ok());
  EXPECT_EQ(packed->view(), block);
}

TEST(CompressionTest, SnappyIsTheRawFormat) {
  // Raw Snappy: varint length 5, then a literal tag (len-1)<<2 and the bytes.
  std::string raw = std::string("\x05\x10", 2) + "hello";
  auto plain = decompress(proto::SNAPPY, common::Slice::copy_of(raw), 5);
  ASSERT_TRUE(plain.is_ok()) << plain.status().message();
  EXPECT_EQ(plain->view(), "hello");
}

}  // namespace
}  // namespace magnetar::client
