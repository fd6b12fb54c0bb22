#include "trial/signup_limiter.h"

#include <gtest/gtest.h>

namespace magnetar::trial {
namespace {

SignupLimiter::Limits limits(uint32_t per_address, uint32_t total, int64_t window_s) {
  SignupLimiter::Limits l;
  l.per_address = per_address;
  l.total = total;
  l.window = std::chrono::seconds(window_s);
  return l;
}

TEST(SignupLimiterTest, AnAddressGetsItsBurstThenOneAPeriod) {
  SignupLimiter limiter(limits(3, 0, 3600));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limiter.try_take("10.0.0.1", 0), 0);
  // Refilled one per 1200 s: the fourth waits that long.
  EXPECT_EQ(limiter.try_take("10.0.0.1", 0), 1200);
  EXPECT_EQ(limiter.try_take("10.0.0.1", 600'000), 600);
  EXPECT_EQ(limiter.try_take("10.0.0.1", 1'200'000), 0);
  // Another address has its own bucket.
  EXPECT_EQ(limiter.try_take("10.0.0.2", 1'200'000), 0);
}

TEST(SignupLimiterTest, TheTotalBoundsEveryAddressTogether) {
  SignupLimiter limiter(limits(5, 4, 60));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(limiter.try_take("10.0.1." + std::to_string(i), 0), 0);
  EXPECT_EQ(limiter.try_take("10.0.2.1", 0), 15);
  // A refusal by the total takes nothing from the address.
  EXPECT_EQ(limiter.try_take("10.0.2.1", 15'000), 0);
}

TEST(SignupLimiterTest, ZeroMeansNoLimit) {
  SignupLimiter limiter(limits(0, 0, 60));
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(limiter.try_take("10.0.0.1", 0), 0);
}

TEST(SignupLimiterTest, TheAddressTableStaysBounded) {
  SignupLimiter limiter(limits(1, 0, 1));
  for (size_t i = 0; i < SignupLimiter::kMaxAddresses; ++i) {
    ASSERT_EQ(limiter.try_take("a" + std::to_string(i), 0), 0);
  }
  // Full, and none has refilled: a new address is refused for now.
  EXPECT_GT(limiter.try_take("new", 0), 0);
  // Once they have refilled they are forgotten, and the new one gets in.
  EXPECT_EQ(limiter.try_take("new", 2000), 0);
}

}  // namespace
}  // namespace magnetar::trial
