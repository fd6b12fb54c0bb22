// TokenBucket and PublishLimits arithmetic on a synthetic clock.
#include "broker/publish_limiter.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace magnetar::broker {
namespace {

constexpr int64_t kSecond = TokenBucket::kNanosPerSecond;

TEST(TokenBucketTest, UnlimitedNeverWaits) {
  TokenBucket b;
  EXPECT_FALSE(b.limited());
  EXPECT_EQ(b.take(1'000'000, 0), 0);
  b.set_rate(-1, 0);
  EXPECT_EQ(b.take(1'000'000, 1), 0);
}

TEST(TokenBucketTest, StartsWithATenthOfASecondAndThenOwes) {
  TokenBucket b;
  b.set_rate(1000, 0);
  EXPECT_EQ(b.take(100, 0), 0);  // the burst
  // One more message is a debt of one token: a millisecond at 1000/s.
  EXPECT_EQ(b.take(1, 0), kSecond / 1000);
  // Half a millisecond later, half of it is paid.
  EXPECT_EQ(b.available(kSecond / 2000), -1);  // whole tokens only
  EXPECT_EQ(b.available(kSecond / 1000), 0);
}

TEST(TokenBucketTest, AdmitsTheRateOverAWindowPlusOneBurst) {
  TokenBucket b;
  b.set_rate(1000, 0);
  int64_t now = 0, admitted = 0;
  // A producer going flat out: one message whenever the bucket is out of debt.
  while (now < 10 * kSecond) {
    int64_t wait = b.take(1, now);
    ++admitted;
    now += wait;
  }
  EXPECT_GE(admitted, 10'000);
  EXPECT_LE(admitted, 10'000 + 100 + 1);
}

TEST(TokenBucketTest, ALargePublishIsAdmittedAndPaidFor) {
  TokenBucket b;
  b.set_rate(100, 0);  // capacity 10
  EXPECT_EQ(b.take(510, 0), 5 * kSecond);  // 500 tokens owed at 100/s
  EXPECT_EQ(b.take(1, 5 * kSecond), kSecond / 100);
  // Idle for an hour: back to a full bucket, not an hour of tokens.
  EXPECT_EQ(b.available(3600 * kSecond), 10);
}

TEST(TokenBucketTest, ANewRateStartsFull) {
  TokenBucket b;
  b.set_rate(10, 0);
  EXPECT_GT(b.take(100, 0), 0);
  b.set_rate(1000, 0);
  EXPECT_EQ(b.available(0), 100);
}

TEST(TokenBucketTest, ConcurrentTakersShareTheRate) {
  TokenBucket b;
  b.set_rate(1'000'000, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&b]() {
      for (int i = 0; i < 100'000; ++i) b.take(1, 0);  // no time passes
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(b.available(0), 100'000 - 400'000);
}

TEST(PublishLimitsTest, WithoutPoliciesNothingIsLimitedAndLimitsAreShared) {
  PublishLimiters limiters(nullptr, std::make_shared<TenantRegistry>(nullptr));
  auto limits = limiters.for_topic(*TopicName::parse("persistent://t/ns/a"));
  EXPECT_EQ(limits->charge(1'000'000, 1'000'000'000), 0);  // no policies: nothing limited
  EXPECT_EQ(limits, limiters.for_topic(*TopicName::parse("persistent://t/ns/a")));
  EXPECT_EQ(limiters.find(*TopicName::parse("persistent://t/ns/b")), nullptr);
  EXPECT_EQ(limits->limited_times(), 0u);
}

}  // namespace
}  // namespace magnetar::broker
