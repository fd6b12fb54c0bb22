#include "server/load_manager.h"

#include <gtest/gtest.h>

namespace magnetar::server {
namespace {

auto any_bundle = [](const std::string&) { return true; };
auto anywhere = [](const std::string&, uint64_t) { return true; };

ShedInput three(double r1, double r2, double r3) {
  ShedInput in;
  in.brokers[1] = BrokerLoad{r1, {"t/n/a", "t/n/b"}};
  in.brokers[2] = BrokerLoad{r2, {"t/n/c"}};
  in.brokers[3] = BrokerLoad{r3, {"t/n/d"}};
  return in;
}

TEST(LoadShedding, ABrokerOverTheAverageTwoRoundsRunningGivesTheBundleNearestHalfTheGap) {
  ShedInput in = three(1000, 100, 0);
  in.bundle_rate = {{"t/n/a", 620}, {"t/n/b", 460}, {"t/n/c", 100}};
  // First round over: remembered, nothing moves yet (rates are noisy).
  ShedChoice first = choose_move(in, any_bundle, anywhere);
  EXPECT_EQ(first.hot, 1u);
  EXPECT_FALSE(first.move.has_value());
  in.hot_last_round = first.hot;
  ShedChoice second = choose_move(in, any_bundle, anywhere);
  ASSERT_TRUE(second.move.has_value());
  EXPECT_EQ(second.move->reason, "msg-rate");
  EXPECT_EQ(second.move->from, 1u);
  EXPECT_EQ(second.move->to, 3u);  // the least busy
  EXPECT_EQ(second.move->bundle, "t/n/b");  // 460 is nearer than 620 to half the gap of 1000
}

TEST(LoadShedding, OneHotBundleAloneIsNotMovedAround) {
  ShedInput in;
  in.brokers[1] = BrokerLoad{1000, {"t/n/a"}};
  in.brokers[2] = BrokerLoad{0, {"t/n/b"}};
  in.bundle_rate = {{"t/n/a", 1000}};
  in.hot_last_round = 1;
  EXPECT_FALSE(choose_move(in, any_bundle, anywhere).move.has_value());  // it would only move the hot spot
}

TEST(LoadShedding, QuietOrEvenBrokersAreLeftAlone) {
  ShedInput quiet = three(90, 0, 0);  // under the floor worth moving for
  quiet.hot_last_round = 1;
  quiet.bundle_rate = {{"t/n/a", 45}, {"t/n/b", 45}};
  EXPECT_FALSE(choose_move(quiet, any_bundle, anywhere).move.has_value());
  ShedInput even = three(1000, 900, 950);
  even.hot_last_round = 1;
  even.bundle_rate = {{"t/n/a", 500}, {"t/n/b", 500}};
  EXPECT_EQ(choose_move(even, any_bundle, anywhere).hot, 0u);
}

TEST(LoadShedding, ABrokerWithTwoBundlesMoreThanAnotherGivesItItsQuietestOne) {
  ShedInput in;
  in.brokers[1] = BrokerLoad{0, {"t/n/a", "t/n/b", "t/n/c"}};
  in.brokers[2] = BrokerLoad{0, {"t/n/d", "t/n/e"}};
  in.brokers[4] = BrokerLoad{0, {}};
  in.bundle_rate = {{"t/n/a", 5}, {"t/n/b", 1}, {"t/n/c", 9}};
  ShedChoice c = choose_move(in, any_bundle, anywhere);
  ASSERT_TRUE(c.move.has_value());
  EXPECT_EQ(c.move->reason, "bundle-count");
  EXPECT_EQ(c.move->from, 1u);
  EXPECT_EQ(c.move->to, 4u);
  EXPECT_EQ(c.move->bundle, "t/n/b");
  // One apart is even enough.
  in.brokers[4].bundles = {"t/n/f", "t/n/g"};
  EXPECT_FALSE(choose_move(in, any_bundle, anywhere).move.has_value());
}

TEST(LoadShedding, CoolingBundlesAndForbiddenBrokersAreSkipped) {
  ShedInput in;
  in.brokers[1] = BrokerLoad{0, {"t/n/a", "t/n/b", "t/n/c"}};
  in.brokers[2] = BrokerLoad{0, {}};
  in.brokers[3] = BrokerLoad{0, {"t/n/d"}};
  auto cooling = [](const std::string& b) { return b != "t/n/a" && b != "t/n/b"; };
  auto not_on_2 = [](const std::string&, uint64_t to) { return to != 2; };
  ShedChoice c = choose_move(in, cooling, not_on_2);
  ASSERT_TRUE(c.move.has_value());
  EXPECT_EQ(c.move->bundle, "t/n/c");
  EXPECT_EQ(c.move->to, 3u);
  auto nowhere = [](const std::string&, uint64_t) { return false; };
  EXPECT_FALSE(choose_move(in, any_bundle, nowhere).move.has_value());
}

TEST(LoadShedding, ABrokerCarryingTheBytesGivesABundleAwayWhenItsMessageCountIsEven) {
  ShedInput in = three(1000, 1000, 1000);
  in.brokers[1].bytes = 90e6;  // large messages: the same count, most of the bytes
  in.brokers[2].bytes = 10e6;
  in.brokers[3].bytes = 10e6;
  in.bundle_bytes = {{"t/n/a", 50e6}, {"t/n/b", 40e6}, {"t/n/c", 10e6}, {"t/n/d", 10e6}};
  auto first = choose_move(in, any_bundle, anywhere);
  EXPECT_FALSE(first.move.has_value());  // once is noise
  EXPECT_EQ(first.hot_bytes, 1u);
  in.hot_bytes_last_round = first.hot_bytes;
  auto second = choose_move(in, any_bundle, anywhere);
  ASSERT_TRUE(second.move.has_value());
  EXPECT_EQ(second.move->reason, "byte-rate");
  EXPECT_EQ(second.move->from, 1u);
  EXPECT_EQ(second.move->bundle, "t/n/b");  // 40 MB/s is nearest half the 80 MB/s gap
  EXPECT_NE(second.move->detail.find("bytes/s"), std::string::npos);
  in.min_bytes = 100e6;  // under the floor: left alone
  EXPECT_FALSE(choose_move(in, any_bundle, anywhere).move.has_value());
}

TEST(BundleSplitting, TheBundleFurthestOverALimitIsSplit) {
  SplitLimits limits;
  limits.topics = 10;
  limits.msg_rate = 1000;
  std::map<std::string, BundleLoad> bundles{
      {"t/n/a", BundleLoad{1500, 0, 4, 0}},   // 1.5x the rate limit
      {"t/n/b", BundleLoad{100, 0, 30, 0}},   // 3x the topic limit
      {"t/n/c", BundleLoad{9000, 0, 1, 0}},   // one topic: a split cannot spread it
      {"t/n/d", BundleLoad{10, 0, 5, 0}}};
  auto all = [](const std::string&) { return true; };
  auto choice = choose_split(bundles, limits, all);
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->bundle, "t/n/b");
  EXPECT_EQ(choice->reason, "split-topics");
  choice = choose_split(bundles, limits, [](const std::string& b) { return b != "t/n/b"; });
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->bundle, "t/n/a");
  EXPECT_EQ(choice->reason, "split-msg-rate");
  limits.topics = 0;  // no limit of that kind
  limits.msg_rate = 0;
  EXPECT_FALSE(choose_split(bundles, limits, all).has_value());
  limits.sessions = 3;
  bundles["t/n/d"].sessions = 7;
  choice = choose_split(bundles, limits, all);
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->bundle, "t/n/d");
  EXPECT_EQ(choice->reason, "split-sessions");
}

}  // namespace
}  // namespace magnetar::server
