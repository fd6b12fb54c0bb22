#include "protocol/kafka/server/exact_offsets.h"

#include <gtest/gtest.h>

#include <string>

namespace magnetar::protocol::kafka {
namespace {

TEST(ExactOffsetsTest, AnOffsetInsideABatchIsKeptWhileTheCursorAgrees) {
  ExactOffsets o(10, 100);
  o.remember("g", "t\n0", 8, 6);
  EXPECT_EQ(o.exact("g", "t\n0", 6), 8);
  EXPECT_EQ(o.exact("g", "t\n0", 10), 10);
  EXPECT_EQ(o.exact("g", "t\n1", 6), 6);
  // A commit on an entry boundary needs no entry and removes the old one.
  o.remember("g", "t\n0", 10, 10);
  EXPECT_EQ(o.size(), 0u);
  EXPECT_EQ(o.exact("g", "t\n0", 6), 6);
}

TEST(ExactOffsetsTest, AGroupKeepsItsMostRecentlyCommittedPartitionsUpToItsBound) {
  ExactOffsets o(3, 100);
  for (int p = 0; p < 5; ++p) o.remember("g", "t\n" + std::to_string(p), 100 + p, 90);
  EXPECT_EQ(o.size(), 3u);
  EXPECT_EQ(o.evicted(), 2u);
  EXPECT_EQ(o.exact("g", "t\n0", 90), 90);  // gone: the aligned offset stands
  EXPECT_EQ(o.exact("g", "t\n1", 90), 90);
  EXPECT_EQ(o.exact("g", "t\n4", 90), 104);
  // Committing again makes a partition the most recent.
  o.remember("g", "t\n2", 202, 90);
  o.remember("g", "t\n5", 105, 90);
  EXPECT_EQ(o.exact("g", "t\n2", 90), 202);
  EXPECT_EQ(o.exact("g", "t\n3", 90), 90);
  EXPECT_EQ(o.size(), 3u);
}

TEST(ExactOffsetsTest, OverTheTotalTheGroupThatCommittedLeastRecentlyGivesWay) {
  ExactOffsets o(10, 4);
  o.remember("old", "t\n0", 1, 0);
  o.remember("old", "t\n1", 1, 0);
  o.remember("busy", "t\n0", 1, 0);
  o.remember("busy", "t\n1", 1, 0);
  o.remember("busy", "t\n2", 1, 0);
  EXPECT_EQ(o.size(), 4u);
  EXPECT_EQ(o.exact("old", "t\n0", 0), 0);  // the oldest entry of the oldest group
  EXPECT_EQ(o.exact("old", "t\n1", 0), 1);
  o.remember("busy", "t\n3", 1, 0);
  EXPECT_EQ(o.exact("old", "t\n1", 0), 0);  // "old" is empty now, and forgotten
  EXPECT_EQ(o.size(), 4u);
  o.forget_group("busy");
  EXPECT_EQ(o.size(), 0u);
}

}  // namespace
}  // namespace magnetar::protocol::kafka
