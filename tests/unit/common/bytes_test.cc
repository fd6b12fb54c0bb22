#include "common/bytes.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace magnetar::common {
namespace {

TEST(SliceTest, SubSlicesShareTheBufferAndKeepItAlive) {
  Slice whole = Slice::copy_of("hello, world");
  const Buffer* buf = whole.buffer();
  EXPECT_EQ(buf->use_count(), 1u);
  Slice hello = whole.sub(0, 5);
  Slice world = whole.sub(7);
  EXPECT_EQ(buf->use_count(), 3u);
  EXPECT_EQ(hello.view(), "hello");
  EXPECT_EQ(world.view(), "world");
  EXPECT_EQ(hello.buffer(), buf);
  whole = Slice();
  EXPECT_EQ(buf->use_count(), 2u);
  EXPECT_EQ(world.view(), "world");  // still readable: world holds a reference
}

TEST(SliceTest, ReferencesCrossThreads) {
  Slice s = Slice::copy_of(std::string(1000, 'x'));
  const Buffer* buf = s.buffer();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([s]() {
      for (int i = 0; i < 10000; ++i) {
        Slice copy = s.sub(i % 100, 10);
        ASSERT_EQ(copy.data()[0], 'x');
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(buf->use_count(), 1u);
}

TEST(SliceChainTest, TakeFrontSharesWithinOneSliceAndCopiesAcross) {
  SliceChain chain;
  Slice a = Slice::copy_of("abcdef");
  chain.append(a);
  chain.append(Slice::copy_of("ghij"));
  EXPECT_EQ(chain.size(), 10u);

  Slice first = chain.take_front(3);
  EXPECT_EQ(first.view(), "abc");
  EXPECT_EQ(first.buffer(), a.buffer());  // no copy
  EXPECT_EQ(chain.size(), 7u);

  Slice across = chain.take_front(5);  // "defgh" spans both slices
  EXPECT_EQ(across.view(), "defgh");
  EXPECT_NE(across.buffer(), a.buffer());
  EXPECT_EQ(chain.size(), 2u);

  char rest[2];
  chain.copy_out(rest, 2);
  EXPECT_EQ(std::string(rest, 2), "ij");
  chain.consume(2);
  EXPECT_TRUE(chain.empty());
}

TEST(SliceChainTest, ManySmallAppendsAndConsumesStayCorrect) {
  SliceChain chain;
  std::string expected;
  for (int i = 0; i < 1000; ++i) {
    std::string piece = std::to_string(i) + ",";
    chain.append(Slice::copy_of(piece));
    expected += piece;
    if (i % 3 == 0) {
      size_t n = std::min<size_t>(chain.size(), 5);
      std::string got(n, '\0');
      chain.copy_out(got.data(), n);
      EXPECT_EQ(got, expected.substr(0, n));
      chain.consume(n);
      expected.erase(0, n);
    }
  }
  EXPECT_EQ(chain.size(), expected.size());
  EXPECT_EQ(chain.take_front(chain.size()).view(), expected);
}

TEST(BufferWriterTest, GrowsAndWritesBigEndian) {
  BufferWriter w(16);
  size_t len_at = w.skip(4);
  w.put_u16_be(0x0102);
  w.put_u64_be(0x0304050607080910ull);
  w.append(std::string(100, 'z'));
  w.patch_u32_be(len_at, static_cast<uint32_t>(w.size() - 4));
  Slice s = w.finish();
  ASSERT_EQ(s.size(), 4u + 2 + 8 + 100);
  const uint8_t* p = s.data();
  EXPECT_EQ((p[0] << 24) | (p[1] << 16) | (p[2] << 8) | p[3], 110);
  EXPECT_EQ(p[4], 0x01);
  EXPECT_EQ(p[5], 0x02);
  EXPECT_EQ(p[6], 0x03);
  EXPECT_EQ(p[13], 0x10);
  EXPECT_EQ(p[14], 'z');
  EXPECT_EQ(w.size(), 0u);
  w.put_u8(7);  // reusable after finish
  EXPECT_EQ(w.finish().view(), std::string(1, '\7'));
}

}  // namespace
}  // namespace magnetar::common
