#include "storage/entry_cache.h"

#include <gtest/gtest.h>

#include <string>

namespace magnetar::storage {
namespace {

using common::Slice;

Slice bytes(size_t n, char c = 'x') { return Slice::copy_of(std::string(n, c)); }

TEST(EntryCacheTest, HoldsARunOfConsecutiveEntries) {
  EntryCache cache(1 << 20);
  for (EntryId e = 0; e < 10; ++e) cache.insert(1, e, Slice::copy_of(std::to_string(e)));
  for (EntryId e = 0; e < 10; ++e) {
    auto got = cache.get(1, e);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->to_string(), std::to_string(e));
  }
  EXPECT_FALSE(cache.get(1, 10).has_value());
  EXPECT_FALSE(cache.get(2, 0).has_value());
}

TEST(EntryCacheTest, ANonConsecutiveInsertStartsANewRunBesideTheOld) {
  EntryCache cache(1 << 20);
  cache.insert(1, 0, bytes(10));
  cache.insert(1, 1, bytes(10));
  cache.insert(1, 5, bytes(10));
  EXPECT_TRUE(cache.get(1, 0).has_value());
  EXPECT_TRUE(cache.get(1, 5).has_value());
  EXPECT_FALSE(cache.get(1, 2).has_value());
  EXPECT_EQ(cache.size_bytes(), 30u);
}

// Two catch-up readers of one ledger, far apart, each extend their own run:
// neither read-ahead evicts the other's.
TEST(EntryCacheTest, TwoReadersOfOneLedgerKeepTheirOwnRuns) {
  EntryCache cache(1 << 20);
  for (EntryId e = 0; e < 100; ++e) {
    cache.insert(1, e, bytes(10));
    cache.insert(1, 5000 + e, bytes(10));
  }
  std::vector<Entry> a, b;
  size_t used = 0;
  EXPECT_EQ(cache.get_range(1, 0, 99, 1 << 20, &a, &used), 100u);
  used = 0;
  EXPECT_EQ(cache.get_range(1, 5000, 5099, 1 << 20, &b, &used), 100u);
}

TEST(EntryCacheTest, PastTheRunLimitTheLeastRecentlyUsedRunGoes) {
  EntryCache cache(1 << 20);
  for (EntryId run = 0; run < 4; ++run) cache.insert(1, run * 100, bytes(10));
  std::vector<Entry> out;
  size_t used = 0;
  EXPECT_EQ(cache.get_range(1, 0, 0, 1 << 20, &out, &used), 1u);  // run 0 is used again
  cache.insert(1, 1000, bytes(10));  // a fifth run: run 100 (least recently used) goes
  EXPECT_TRUE(cache.get(1, 0).has_value());
  EXPECT_FALSE(cache.get(1, 100).has_value());
  EXPECT_TRUE(cache.get(1, 200).has_value());
  EXPECT_TRUE(cache.get(1, 1000).has_value());
  EXPECT_EQ(cache.size_bytes(), 40u);
}

TEST(EntryCacheTest, ReinsertingAHeldEntryKeepsTheFirstCopy) {
  EntryCache cache(1 << 20);
  cache.insert(1, 0, Slice::copy_of("a"));
  cache.insert(1, 0, Slice::copy_of("b"));
  EXPECT_EQ(cache.get(1, 0)->to_string(), "a");
}

TEST(EntryCacheTest, EvictsOldestFirstWhenOverBudget) {
  // One ledger may use the whole budget.
  EntryCache cache(1000);
  for (EntryId e = 0; e < 20; ++e) cache.insert(3, e, bytes(100));
  EXPECT_LE(cache.size_bytes(), 1000u);
  EXPECT_FALSE(cache.get(3, 0).has_value());
  EXPECT_TRUE(cache.get(3, 19).has_value());
  EXPECT_TRUE(cache.get(3, 10).has_value());
  EXPECT_FALSE(cache.get(3, 9).has_value());
}

TEST(EntryCacheTest, LedgersShareTheBudget) {
  EntryCache cache(1000);
  for (EntryId e = 0; e < 4; ++e) cache.insert(1, e, bytes(100));
  // Ledger 2 (another shard) fills the rest and then evicts its own oldest.
  for (EntryId e = 0; e < 20; ++e) cache.insert(2, e, bytes(100));
  EXPECT_LE(cache.size_bytes(), 1000u);
  EXPECT_TRUE(cache.get(1, 0).has_value());
  EXPECT_TRUE(cache.get(2, 19).has_value());
  EXPECT_TRUE(cache.get(2, 14).has_value());
  EXPECT_FALSE(cache.get(2, 13).has_value());
}

TEST(EntryCacheTest, ManyRunResetsDoNotGrowWithoutBound) {
  EntryCache cache(16 * 1000);
  for (EntryId e = 0; e < 100000; e += 2) cache.insert(4, e, bytes(1));
  EXPECT_EQ(cache.size_bytes(), 4u);  // one entry in each of the runs a ledger keeps
}

TEST(EntryCacheTest, GetRangeStopsAtTheByteBudgetButReturnsOne) {
  EntryCache cache(1 << 20);
  for (EntryId e = 0; e < 10; ++e) cache.insert(1, e, bytes(100));
  std::vector<Entry> out;
  size_t used = 0;
  EXPECT_EQ(cache.get_range(1, 2, 9, 250, &out, &used), 2u);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].id, 2);
  EXPECT_EQ(out[1].id, 3);
  std::vector<Entry> one;
  used = 0;
  EXPECT_EQ(cache.get_range(1, 0, 9, 10, &one, &used), 1u);
}

TEST(EntryCacheTest, EraseLedgerDropsItsEntries) {
  EntryCache cache(1 << 20);
  cache.insert(1, 0, bytes(10));
  cache.insert(2, 0, bytes(10));
  cache.erase_ledger(1);
  EXPECT_FALSE(cache.get(1, 0).has_value());
  EXPECT_TRUE(cache.get(2, 0).has_value());
  EXPECT_EQ(cache.size_bytes(), 10u);
}

TEST(EntryCacheTest, ZeroBudgetHoldsNothing) {
  EntryCache cache(0);
  cache.insert(1, 0, bytes(10));
  EXPECT_FALSE(cache.get(1, 0).has_value());
}

}  // namespace
}  // namespace magnetar::storage
