#include "storage/index.h"

#include <gtest/gtest.h>

#include "storage_test_util.h"

namespace magnetar::storage {
namespace {

using testing::TempDir;

EntryLocation loc(uint64_t segment, uint64_t offset, uint32_t size = 100) { return {segment, offset, size}; }

TEST(IndexTest, LooksUpEntriesAcrossRuns) {
  TempDir dir;
  auto index = Index::open(dir.path() + "/index");
  ASSERT_TRUE(index.is_ok()) << index.status().to_string();
  Index::Batch b1;
  for (EntryId e = 0; e < 10; ++e) b1.add_entry(7, e, loc(1, 16 + e * 200));
  ASSERT_TRUE((*index)->write(b1, false).is_ok());
  Index::Batch b2;
  for (EntryId e = 10; e < 20; ++e) b2.add_entry(7, e, loc(2, 16 + (e - 10) * 100));
  ASSERT_TRUE((*index)->write(b2, false).is_ok());

  auto got = (*index)->lookup(7, 5, 100);
  ASSERT_TRUE(got.is_ok());
  ASSERT_EQ(got->size(), 15u);
  EXPECT_EQ((*got)[0].segment, 1u);
  EXPECT_EQ((*got)[0].offset, 16u + 5 * 200);
  EXPECT_EQ((*got)[5].segment, 2u);
  EXPECT_EQ((*got)[5].offset, 16u);
  EXPECT_EQ((*got)[14].offset, 16u + 9 * 100);
  EXPECT_EQ((*got)[14].size, 100u);

  auto limited = (*index)->lookup(7, 0, 3);
  ASSERT_TRUE(limited.is_ok());
  EXPECT_EQ(limited->size(), 3u);
  auto missing = (*index)->lookup(7, 20, 10);
  ASSERT_TRUE(missing.is_ok());
  EXPECT_TRUE(missing->empty());
  auto other = (*index)->lookup(8, 0, 10);
  ASSERT_TRUE(other.is_ok());
  EXPECT_TRUE(other->empty());
  EXPECT_EQ(*(*index)->last_entry(7), 19);
  EXPECT_EQ(*(*index)->last_entry(8), kNoEntry);
  EXPECT_EQ(*(*index)->last_entry(6), kNoEntry);
}

TEST(IndexTest, InterleavedLedgersInOneBatchKeepTheirOwnRuns) {
  TempDir dir;
  auto index = Index::open(dir.path() + "/index");
  ASSERT_TRUE(index.is_ok());
  Index::Batch b;
  uint64_t off = 16;
  for (EntryId e = 0; e < 5; ++e) {
    b.add_entry(1, e, loc(1, off));
    off += 100;
    b.add_entry(2, e, loc(1, off));
    off += 100;
  }
  ASSERT_TRUE((*index)->write(b, false).is_ok());
  auto one = (*index)->lookup(1, 0, 10);
  auto two = (*index)->lookup(2, 0, 10);
  ASSERT_EQ(one->size(), 5u);
  ASSERT_EQ(two->size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ((*one)[i].offset, 16 + i * 200);
    EXPECT_EQ((*two)[i].offset, 116 + i * 200);
  }
}

TEST(IndexTest, AHoleEndsALookup) {
  TempDir dir;
  auto index = Index::open(dir.path() + "/index");
  ASSERT_TRUE(index.is_ok());
  Index::Batch b;
  for (EntryId e : {0, 1, 2, 5, 6}) b.add_entry(1, e, loc(1, 16 + e * 100));
  ASSERT_TRUE((*index)->write(b, false).is_ok());
  EXPECT_EQ((*index)->lookup(1, 0, 10)->size(), 3u);
  EXPECT_TRUE((*index)->lookup(1, 3, 10)->empty());
  EXPECT_EQ((*index)->lookup(1, 5, 10)->size(), 2u);
}

TEST(IndexTest, ReindexingTheSameEntriesIsHarmless) {
  TempDir dir;
  auto index = Index::open(dir.path() + "/index");
  ASSERT_TRUE(index.is_ok());
  Index::Batch b;
  for (EntryId e = 0; e < 10; ++e) b.add_entry(1, e, loc(1, 16 + e * 100));
  ASSERT_TRUE((*index)->write(b, false).is_ok());
  // A replay after a lost checkpoint groups the same records differently.
  for (EntryId e = 3; e < 15; ++e) b.add_entry(1, e, loc(1, 16 + e * 100));
  ASSERT_TRUE((*index)->write(b, false).is_ok());
  auto all = (*index)->lookup(1, 0, 100);
  ASSERT_EQ(all->size(), 15u);
  for (size_t i = 0; i < 15; ++i) EXPECT_EQ((*all)[i].offset, 16 + i * 100);
}

TEST(IndexTest, LedgersCheckpointAndSegmentReferencesPersist) {
  TempDir dir;
  {
    auto index = Index::open(dir.path() + "/index");
    ASSERT_TRUE(index.is_ok());
    Index::Batch b;
    b.put_ledger(LedgerMeta{1, false, kNoEntry});
    b.put_ledger(LedgerMeta{2, true, 41});
    b.add_entry(1, 0, loc(3, 16));
    b.add_entry(2, 0, loc(3, 116));
    b.add_entry(2, 1, loc(4, 16));
    b.set_checkpoint(Checkpoint{4, 116});
    ASSERT_TRUE((*index)->write(b, true).is_ok());
  }
  auto index = Index::open(dir.path() + "/index");
  ASSERT_TRUE(index.is_ok());
  auto cp = (*index)->checkpoint();
  ASSERT_TRUE(cp.is_ok());
  EXPECT_EQ(cp->segment, 4u);
  EXPECT_EQ(cp->offset, 116u);
  auto ledgers = (*index)->ledgers();
  ASSERT_TRUE(ledgers.is_ok());
  ASSERT_EQ(ledgers->size(), 2u);
  EXPECT_FALSE((*ledgers)[0].closed);
  EXPECT_TRUE((*ledgers)[1].closed);
  EXPECT_EQ((*ledgers)[1].last_entry, 41);
  auto refs = (*index)->segment_refs();
  ASSERT_TRUE(refs.is_ok());
  EXPECT_EQ((*refs)[3], (std::set<LedgerId>{1, 2}));
  EXPECT_EQ((*refs)[4], (std::set<LedgerId>{2}));
}

TEST(IndexTest, DeleteLedgerRemovesEverythingAndNamesItsSegments) {
  TempDir dir;
  auto index = Index::open(dir.path() + "/index");
  ASSERT_TRUE(index.is_ok());
  Index::Batch b;
  b.put_ledger(LedgerMeta{1, false, kNoEntry});
  b.put_ledger(LedgerMeta{2, false, kNoEntry});
  b.add_entry(1, 0, loc(3, 16));
  b.add_entry(2, 0, loc(3, 116));
  b.add_entry(2, 1, loc(4, 16));
  ASSERT_TRUE((*index)->write(b, false).is_ok());
  std::set<uint64_t> segments;
  ASSERT_TRUE((*index)->delete_ledger(2, &segments).is_ok());
  EXPECT_EQ(segments, (std::set<uint64_t>{3, 4}));
  EXPECT_TRUE((*index)->lookup(2, 0, 10)->empty());
  EXPECT_EQ((*index)->lookup(1, 0, 10)->size(), 1u);
  EXPECT_EQ((*index)->ledgers()->size(), 1u);
  auto refs = (*index)->segment_refs();
  EXPECT_EQ(refs->size(), 1u);
  EXPECT_EQ((*refs)[3], (std::set<LedgerId>{1}));
}

TEST(IndexTest, EmptyIndexHasAZeroCheckpoint) {
  TempDir dir;
  auto index = Index::open(dir.path() + "/index");
  ASSERT_TRUE(index.is_ok());
  auto cp = (*index)->checkpoint();
  ASSERT_TRUE(cp.is_ok());
  EXPECT_EQ(cp->segment, 0u);
  Index::Batch empty;
  EXPECT_TRUE(empty.empty());
}

}  // namespace
}  // namespace magnetar::storage
