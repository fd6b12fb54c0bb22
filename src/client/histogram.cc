#include "client/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace magnetar::client {
namespace {

constexpr int kSub = Histogram::kSubBucketBits;
constexpr uint64_t kLinear = uint64_t{1} << (kSub + 1);  // values below this have a bucket each
// Exponents 1..(63 - kSub), each with 2^kSub buckets, after the linear part.
constexpr size_t kBuckets = kLinear + (64 - kSub - 1) * (size_t{1} << kSub);

}  // namespace

Histogram::Histogram() : buckets_(kBuckets, 0) {}

size_t Histogram::bucket_of(uint64_t value) {
  if (value < kLinear) return static_cast<size_t>(value);
  int msb = 63 - std::countl_zero(value);
  int e = msb - kSub;  // >= 1
  return static_cast<size_t>(e) * (size_t{1} << kSub) + static_cast<size_t>(value >> e);
}

uint64_t Histogram::bucket_low(size_t bucket) {
  if (bucket < kLinear) return bucket;
  size_t e = bucket / (size_t{1} << kSub) - 1;
  uint64_t mantissa = bucket - e * (size_t{1} << kSub);
  return mantissa << e;
}

uint64_t Histogram::bucket_high(size_t bucket) {
  if (bucket < kLinear) return bucket;
  size_t e = bucket / (size_t{1} << kSub) - 1;
  return bucket_low(bucket) + ((uint64_t{1} << e) - 1);
}

void Histogram::record_n(uint64_t value, uint64_t n) {
  if (n == 0) return;
  buckets_[bucket_of(value)] += n;
  count_ += n;
  min_ = std::min(min_, value);
  max_ = std::max(max_, value);
  sum_ += static_cast<unsigned __int128>(value) * n;
}

void Histogram::merge(const Histogram& other) {
  for (size_t i = 0; i < buckets_.size(); ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  sum_ += other.sum_;
}

void Histogram::reset() {
  std::fill(buckets_.begin(), buckets_.end(), 0);
  count_ = 0;
  min_ = UINT64_MAX;
  max_ = 0;
  sum_ = 0;
}

uint64_t Histogram::percentile(double percentile) const {
  if (count_ == 0) return 0;
  if (percentile >= 100) return max_;
  double p = std::max(0.0, percentile);
  uint64_t rank = static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count_)));
  rank = std::max<uint64_t>(rank, 1);
  uint64_t seen = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    seen += buckets_[i];
    if (seen >= rank) return std::clamp(bucket_high(i), min_, max_);
  }
  return max_;
}

}  // namespace magnetar::client
