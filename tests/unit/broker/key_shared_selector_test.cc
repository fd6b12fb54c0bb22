// KeySharedSelector: Pulsar's sticky key hash, auto-split ranges as
// consumers join and leave, sticky ranges and their conflicts.
#include "broker/key_shared_selector.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace magnetar::broker {
namespace {

TEST(StickyKeyHashTest, IsMurmur3WithTheSignBitCleared) {
  // MurmurHash3_x86_32 reference values, seed 0.
  EXPECT_EQ(sticky_key_hash(""), 0u);
  EXPECT_EQ(sticky_key_hash("hello"), 0x248bfa47u);
  EXPECT_EQ(sticky_key_hash("The quick brown fox jumps over the lazy dog"), 0x2e4ff723u);
  for (std::string_view k : {"a", "ab", "abc", "abcd", "abcde", "key-17", "NONE_KEY"}) {
    EXPECT_LT(sticky_key_hash(k), 0x80000000u) << k;
    EXPECT_EQ(sticky_key_slot(k), sticky_key_hash(k) % kHashRangeSize);
  }
}

TEST(KeySharedSelectorTest, AutoSplitHalvesTheWidestRangeForEachNewConsumer) {
  KeySharedSelector s(KeySharedMode::kAutoSplit);
  EXPECT_FALSE(s.select(0).has_value());
  ASSERT_TRUE(s.add_consumer(1, {}).is_ok());
  EXPECT_EQ(s.ranges_of(1), (std::vector<HashRange>{{0, 65535}}));
  ASSERT_TRUE(s.add_consumer(2, {}).is_ok());
  EXPECT_EQ(s.ranges_of(2), (std::vector<HashRange>{{0, 32767}}));
  EXPECT_EQ(s.ranges_of(1), (std::vector<HashRange>{{32768, 65535}}));
  ASSERT_TRUE(s.add_consumer(3, {}).is_ok());
  EXPECT_EQ(s.ranges_of(3), (std::vector<HashRange>{{0, 16383}}));
  EXPECT_EQ(s.ranges_of(2), (std::vector<HashRange>{{16384, 32767}}));
  EXPECT_EQ(s.select(0), 3u);
  EXPECT_EQ(s.select(16383), 3u);
  EXPECT_EQ(s.select(16384), 2u);
  EXPECT_EQ(s.select(32768), 1u);
  EXPECT_EQ(s.select(65535), 1u);
}

TEST(KeySharedSelectorTest, ALeavingConsumersRangeGoesToItsNeighbour) {
  KeySharedSelector s(KeySharedMode::kAutoSplit);
  for (uint64_t id : {1, 2, 3}) ASSERT_TRUE(s.add_consumer(id, {}).is_ok());
  // 3: [0, 16383], 2: [16384, 32767], 1: [32768, 65535]
  s.remove_consumer(2);
  EXPECT_EQ(s.ranges_of(1), (std::vector<HashRange>{{16384, 65535}}));
  s.remove_consumer(1);  // the topmost range goes to the one below
  EXPECT_EQ(s.ranges_of(3), (std::vector<HashRange>{{0, 65535}}));
  s.remove_consumer(3);
  EXPECT_TRUE(s.empty());
}

TEST(KeySharedSelectorTest, AutoSplitAlwaysCoversEverySlotExactlyOnce) {
  KeySharedSelector s(KeySharedMode::kAutoSplit);
  std::mt19937 rng(7);
  std::set<uint64_t> present;
  uint64_t next_id = 1;
  for (int step = 0; step < 300; ++step) {
    if (present.empty() || rng() % 3 != 0) {
      ASSERT_TRUE(s.add_consumer(next_id, {}).is_ok());
      present.insert(next_id++);
    } else {
      auto it = present.begin();
      std::advance(it, rng() % present.size());
      s.remove_consumer(*it);
      present.erase(it);
    }
    if (present.empty()) continue;
    uint32_t covered = 0;
    for (uint64_t id : present) {
      auto ranges = s.ranges_of(id);
      ASSERT_EQ(ranges.size(), 1u) << "auto-split gives each consumer one range";
      covered += ranges[0].end - ranges[0].start + 1;
      EXPECT_EQ(s.select(ranges[0].start), id);
      EXPECT_EQ(s.select(ranges[0].end), id);
    }
    ASSERT_EQ(covered, kHashRangeSize);
  }
}

TEST(KeySharedSelectorTest, StickyRangesThatOverlapAreRefusedAndChangeNothing) {
  KeySharedSelector s(KeySharedMode::kSticky);
  ASSERT_TRUE(s.add_consumer(1, {{0, 99}, {200, 299}}).is_ok());
  ASSERT_TRUE(s.add_consumer(2, {{100, 199}}).is_ok());  // adjacent is fine
  auto overlap = s.add_consumer(3, {{300, 400}, {250, 260}});
  EXPECT_EQ(overlap.code(), common::ErrorCode::kFailedPrecondition);
  EXPECT_NE(overlap.message().find("overlaps"), std::string::npos) << overlap.message();
  EXPECT_TRUE(s.ranges_of(3).empty());
  EXPECT_FALSE(s.select(350).has_value());
  // Overlapping each other, empty, out of bounds, none at all.
  EXPECT_EQ(s.add_consumer(4, {{1000, 2000}, {1500, 1600}}).code(), common::ErrorCode::kFailedPrecondition);
  EXPECT_EQ(s.add_consumer(4, {{10, 5}}).code(), common::ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.add_consumer(4, {{65000, 65536}}).code(), common::ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.add_consumer(4, {}).code(), common::ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.select(0), 1u);
  EXPECT_EQ(s.select(150), 2u);
  EXPECT_EQ(s.select(299), 1u);
  EXPECT_FALSE(s.select(300).has_value());  // nobody named it
  s.remove_consumer(1);
  EXPECT_FALSE(s.select(0).has_value());
  ASSERT_TRUE(s.add_consumer(3, {{0, 99}, {300, 65535}}).is_ok());
  EXPECT_EQ(s.select(65535), 3u);
}

}  // namespace
}  // namespace magnetar::broker
