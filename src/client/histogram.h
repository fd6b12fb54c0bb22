// Histogram: latency percentiles with bounded relative error, in the manner
// of HdrHistogram.
//
// Values are non-negative integers (microseconds in `magnetar perf`). Values
// below 2^(kSubBucketBits+1) have a bucket each; above that, every power of
// two is split into 2^kSubBucketBits equal buckets, so a value is reported
// within 1/2^kSubBucketBits (0.8%) of what was recorded. min, max, count and
// the mean are exact. Recording is a few shifts and an increment; memory is
// fixed (a few tens of KiB) whatever the range.
//
// Not thread-safe: one thread records; merge() combines per-thread or
// per-interval histograms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace magnetar::client {

class Histogram {
 public:
  static constexpr int kSubBucketBits = 7;

  Histogram();

  void record(uint64_t value) { record_n(value, 1); }
  void record_n(uint64_t value, uint64_t n);
  void merge(const Histogram& other);
  void reset();

  uint64_t count() const { return count_; }
  uint64_t min() const { return count_ == 0 ? 0 : min_; }
  uint64_t max() const { return max_; }
  double mean() const { return count_ == 0 ? 0 : static_cast<double>(sum_) / static_cast<double>(count_); }
  // The smallest recorded-bucket value v such that at least `percentile`% of
  // the values are <= v (to within the relative error); the exact max for 100.
  // 0 when empty.
  uint64_t percentile(double percentile) const;

  // Bucket arithmetic, public for tests.
  static size_t bucket_of(uint64_t value);
  static uint64_t bucket_low(size_t bucket);
  static uint64_t bucket_high(size_t bucket);  // inclusive

 private:
  std::vector<uint64_t> buckets_;
  uint64_t count_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
  unsigned __int128 sum_ = 0;
};

}  // namespace magnetar::client
