#include "replication/placement.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace magnetar::replication {
namespace {

std::function<std::string(NodeId)> zones(std::map<NodeId, std::string> z) {
  return [z](NodeId n) {
    auto it = z.find(n);
    return it == z.end() ? std::string() : it->second;
  };
}

TEST(PlacementTest, WithoutZonesTheOrderGivenIsKeptAndNoNodeTwice) {
  EXPECT_EQ(choose_nodes({4, 2, 7, 2, 9}, {}, 3, nullptr), (std::vector<NodeId>{4, 2, 7}));
  EXPECT_EQ(choose_nodes({4, 2, 7}, {2}, 3, nullptr), (std::vector<NodeId>{4, 7}));
  EXPECT_TRUE(choose_nodes({}, {}, 3, nullptr).empty());
  EXPECT_TRUE(choose_nodes({1, 2}, {}, 0, nullptr).empty());
}

TEST(PlacementTest, CopiesSpreadAcrossZonesFirstCandidateFirst) {
  auto z = zones({{1, "a"}, {2, "a"}, {3, "a"}, {4, "b"}, {5, "b"}, {6, "c"}});
  // 1 first (the writer's own node), then one of each other zone before a second in any.
  EXPECT_EQ(choose_nodes({1, 2, 3, 4, 5, 6}, {}, 3, z), (std::vector<NodeId>{1, 4, 6}));
  EXPECT_EQ(choose_nodes({1, 2, 3, 4, 5, 6}, {}, 5, z), (std::vector<NodeId>{1, 4, 6, 2, 5}));
}

TEST(PlacementTest, AReplacementGoesToTheZoneWithFewestCopies) {
  auto z = zones({{1, "a"}, {2, "a"}, {3, "b"}, {4, "b"}, {5, "c"}});
  // Copies left on 1 (a) and 3 (b): the replacement comes from c, though listed last.
  EXPECT_EQ(choose_nodes({2, 4, 5}, {1, 3}, 1, z), (std::vector<NodeId>{5}));
  // Zone c has no candidate: the first of the others.
  EXPECT_EQ(choose_nodes({4, 2}, {1, 3}, 1, z), (std::vector<NodeId>{4}));
}

TEST(PlacementTest, NodesWithoutAZoneAreOneZoneAmongTheOthers) {
  auto z = zones({{1, "a"}, {2, "a"}});
  // 3 and 4 declare none: one "zone" of their own.
  EXPECT_EQ(choose_nodes({1, 2, 3, 4}, {}, 3, z), (std::vector<NodeId>{1, 3, 2}));
}

}  // namespace
TEST(PlacementTest, AnAffinityKeepsCopiesInItsGroupsPrimaryFirst) {
  auto groups = zones({{1, "g1"}, {2, "g1"}, {3, "g2"}, {4, "g2"}, {5, "other"}});
  const Affinity affinity{"g1", "g2"};
  const auto tiers = affinity_tiers({5, 4, 3, 2, 1, 6}, affinity, groups);
  ASSERT_EQ(tiers.size(), 2u);
  EXPECT_EQ(tiers[0], (std::vector<NodeId>{2, 1}));
  EXPECT_EQ(tiers[1], (std::vector<NodeId>{4, 3}));  // 5 (other group) and 6 (none) are in neither
  EXPECT_EQ(choose_in_tiers(tiers, {}, 2, nullptr), (std::vector<NodeId>{2, 1}));
  // Three copies: the primary group has two nodes, the secondary gives the third.
  EXPECT_EQ(choose_in_tiers(tiers, {}, 3, nullptr), (std::vector<NodeId>{2, 1, 4}));
  // Never more than the groups hold.
  EXPECT_EQ(choose_in_tiers(tiers, {}, 6, nullptr).size(), 4u);
  // Comma-separated names, and no affinity at all: one tier of every candidate.
  EXPECT_EQ(affinity_tiers({1, 3, 5}, Affinity{"g2, other", ""}, groups)[0], (std::vector<NodeId>{3, 5}));
  EXPECT_EQ(affinity_tiers({1, 3, 5}, Affinity{}, groups), (std::vector<std::vector<NodeId>>{{1, 3, 5}}));
}

}  // namespace magnetar::replication
