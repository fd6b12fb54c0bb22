#include "common/crc32c.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace magnetar::common {
namespace {

using Impl = uint32_t (*)(uint32_t, const void*, size_t);

std::vector<std::pair<const char*, Impl>> implementations() {
  std::vector<std::pair<const char*, Impl>> impls = {{"software", &crc32c::extend_software},
                                                     {"dispatch", &crc32c::extend}};
  if (crc32c::hardware_available()) impls.push_back({"hardware", &crc32c::extend_hardware});
  return impls;
}

// RFC 3720 (iSCSI), appendix B.4, and the common check value.
TEST(Crc32cTest, PublishedVectors) {
  for (auto [name, fn] : implementations()) {
    SCOPED_TRACE(name);
    std::vector<uint8_t> buf(32, 0x00);
    EXPECT_EQ(fn(0, buf.data(), buf.size()), 0x8A9136AAu);
    std::fill(buf.begin(), buf.end(), 0xFF);
    EXPECT_EQ(fn(0, buf.data(), buf.size()), 0x62A8AB43u);
    for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(i);
    EXPECT_EQ(fn(0, buf.data(), buf.size()), 0x46DD794Eu);
    for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(31 - i);
    EXPECT_EQ(fn(0, buf.data(), buf.size()), 0x113FDB5Cu);
    EXPECT_EQ(fn(0, "123456789", 9), 0xE3069283u);
    EXPECT_EQ(fn(0, "", 0), 0u);
  }
}

TEST(Crc32cTest, ExtendEqualsWholeAtEverySplit) {
  std::string data = "The quick brown fox jumps over the lazy dog, twice over.";
  uint32_t whole = crc32c::value(data);
  for (size_t split = 0; split <= data.size(); ++split) {
    uint32_t part = crc32c::extend(crc32c::value(data.data(), split), data.data() + split, data.size() - split);
    EXPECT_EQ(part, whole) << "split at " << split;
  }
}

TEST(Crc32cTest, ImplementationsAgreeOnRandomUnalignedInput) {
  std::mt19937 rng(12345);
  std::vector<uint8_t> buf(70000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (int round = 0; round < 300; ++round) {
    size_t off = rng() % 64;
    size_t len = rng() % (buf.size() - off);
    uint32_t expected = crc32c::extend_software(0, buf.data() + off, len);
    for (auto [name, fn] : implementations()) {
      ASSERT_EQ(fn(0, buf.data() + off, len), expected) << name << " off=" << off << " len=" << len;
    }
  }
}

TEST(Crc32cTest, DetectsASingleFlippedBit) {
  std::vector<uint8_t> buf(4096, 0x5A);
  uint32_t good = crc32c::value(buf.data(), buf.size());
  buf[1234] ^= 0x10;
  EXPECT_NE(crc32c::value(buf.data(), buf.size()), good);
}

}  // namespace
}  // namespace magnetar::common
