#include "client/histogram.h"

#include <gtest/gtest.h>

#include <random>

namespace magnetar::client {
namespace {

TEST(HistogramTest, EmptyReportsZeros) {
  Histogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.percentile(50), 0u);
  EXPECT_EQ(h.max(), 0u);
  EXPECT_EQ(h.min(), 0u);
}

TEST(HistogramTest, SmallValuesAreExact) {
  Histogram h;
  for (uint64_t v = 1; v <= 100; ++v) h.record(v);
  EXPECT_EQ(h.percentile(50), 50u);
  EXPECT_EQ(h.percentile(99), 99u);
  EXPECT_EQ(h.percentile(100), 100u);
  EXPECT_EQ(h.min(), 1u);
  EXPECT_DOUBLE_EQ(h.mean(), 50.5);
}

TEST(HistogramTest, BucketsTileTheRangeWithoutGaps) {
  uint64_t expected_low = 0;
  for (size_t b = 0; b < 5000; ++b) {
    ASSERT_EQ(Histogram::bucket_low(b), expected_low) << b;
    ASSERT_EQ(Histogram::bucket_of(Histogram::bucket_low(b)), b);
    ASSERT_EQ(Histogram::bucket_of(Histogram::bucket_high(b)), b);
    expected_low = Histogram::bucket_high(b) + 1;
  }
  EXPECT_LT(Histogram::bucket_of(UINT64_MAX), 64u * 128u + 256u);
}

TEST(HistogramTest, RelativeErrorIsBounded) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100000; ++i) {
    uint64_t v = rng() >> (rng() % 64);
    size_t b = Histogram::bucket_of(v);
    uint64_t lo = Histogram::bucket_low(b), hi = Histogram::bucket_high(b);
    ASSERT_LE(lo, v);
    ASSERT_GE(hi, v);
    ASSERT_LE(static_cast<double>(hi - lo), static_cast<double>(v) / 128.0 + 1) << v;
  }
}

TEST(HistogramTest, PercentilesOfAWideDistribution) {
  Histogram h;
  // 990 fast values (100 us) and 10 slow ones (50 ms): p99 is fast, p99.9 slow.
  h.record_n(100, 990);
  h.record_n(50000, 10);
  EXPECT_EQ(h.percentile(50), 100u);
  EXPECT_EQ(h.percentile(99), 100u);
  uint64_t p999 = h.percentile(99.9);
  EXPECT_GE(p999, 50000u);
  EXPECT_LE(p999, 50000u + 50000u / 128);
  EXPECT_EQ(h.max(), 50000u);
}

TEST(HistogramTest, MergeAddsAndResetEmpties) {
  Histogram a, b;
  a.record(10);
  b.record(1000000);
  a.merge(b);
  EXPECT_EQ(a.count(), 2u);
  EXPECT_EQ(a.min(), 10u);
  EXPECT_EQ(a.max(), 1000000u);
  a.reset();
  EXPECT_EQ(a.count(), 0u);
  EXPECT_EQ(a.percentile(99), 0u);
}

}  // namespace
}  // namespace magnetar::client
