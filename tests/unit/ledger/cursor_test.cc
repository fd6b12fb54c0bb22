#include "ledger/cursor.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace magnetar::ledger {
namespace {

// Ledgers 10 (5 entries), 11 (0 entries), 12 (3 entries).
LedgerChain chain() {
  LedgerChain c;
  c.append({10, 5});
  c.append({11, 0});
  c.append({12, 3});
  return c;
}

TEST(LedgerChainTest, WalksAcrossLedgersAndSkipsEmptyOnes) {
  LedgerChain c = chain();
  EXPECT_EQ(c.next({10, -1}), (Position{10, 0}));
  EXPECT_EQ(c.next({10, 4}), (Position{12, 0}));
  EXPECT_EQ(c.next({12, 2}), std::nullopt);
  EXPECT_EQ(c.next({9, 7}), (Position{10, 0}));  // a ledger no longer in the chain
  EXPECT_EQ(c.entries_after({10, 2}), 5u);
  EXPECT_EQ(c.entries_after({10, -1}), 8u);
  EXPECT_EQ(c.last_position(), (Position{12, 2}));
  EXPECT_TRUE(c.contains({12, 0}));
  EXPECT_FALSE(c.contains({11, 0}));
  EXPECT_EQ(c.total_entries(), 8u);
}

TEST(CursorTest, InOrderAcksMoveTheMarkDeletePosition) {
  LedgerChain c = chain();
  Cursor cur("sub", {10, -1}, true);
  EXPECT_EQ(cur.backlog_entries(c), 8u);
  ASSERT_TRUE(cur.ack({10, 0}, c).is_ok());
  ASSERT_TRUE(cur.ack({10, 1}, c).is_ok());
  EXPECT_EQ(cur.mark_delete_position(), (Position{10, 1}));
  EXPECT_TRUE(cur.individually_acknowledged().empty());
  EXPECT_EQ(cur.backlog_entries(c), 6u);
}

TEST(CursorTest, OutOfOrderAcksWaitForTheHoleThenJumpAcrossLedgers) {
  LedgerChain c = chain();
  Cursor cur("sub", {10, -1}, true);
  for (EntryId e : {1, 2, 3, 4}) ASSERT_TRUE(cur.ack({10, e}, c).is_ok());
  ASSERT_TRUE(cur.ack({12, 0}, c).is_ok());
  EXPECT_EQ(cur.mark_delete_position(), (Position{10, -1}));
  EXPECT_EQ(cur.backlog_entries(c), 3u);
  EXPECT_TRUE(cur.is_acknowledged({10, 3}));
  EXPECT_FALSE(cur.is_acknowledged({10, 0}));
  EXPECT_EQ(cur.next_unacknowledged({10, -1}, c), (Position{10, 0}));
  EXPECT_EQ(cur.next_unacknowledged({10, 0}, c), (Position{12, 1}));
  ASSERT_TRUE(cur.ack({10, 0}, c).is_ok());
  EXPECT_EQ(cur.mark_delete_position(), (Position{12, 0}));
  EXPECT_TRUE(cur.individually_acknowledged().empty());
  EXPECT_EQ(cur.backlog_entries(c), 2u);
}

TEST(CursorTest, CumulativeAckAndUnknownPositions) {
  LedgerChain c = chain();
  Cursor cur("sub", {10, -1}, true);
  ASSERT_TRUE(cur.ack({12, 1}, c).is_ok());
  ASSERT_TRUE(cur.ack_cumulative({12, 0}, c).is_ok());
  EXPECT_EQ(cur.mark_delete_position(), (Position{12, 1}));
  EXPECT_EQ(cur.backlog_entries(c), 1u);
  EXPECT_EQ(cur.ack({11, 0}, c).code(), common::ErrorCode::kInvalidArgument);
  EXPECT_EQ(cur.ack({12, 3}, c).code(), common::ErrorCode::kInvalidArgument);
  ASSERT_TRUE(cur.ack_cumulative({10, 2}, c).is_ok());  // behind: no change
  EXPECT_EQ(cur.mark_delete_position(), (Position{12, 1}));
}

TEST(CursorTest, BatchEntriesAreAcknowledgedMessageByMessage) {
  LedgerChain c = chain();
  Cursor cur("sub", {10, -1}, true);
  ASSERT_TRUE(cur.ack_batch_index({10, 0}, 0, 3, c).is_ok());
  ASSERT_TRUE(cur.ack_batch_index({10, 0}, 2, 3, c).is_ok());
  EXPECT_FALSE(cur.is_acknowledged({10, 0}));
  EXPECT_EQ(cur.batch_acks({10, 0}), std::vector<uint64_t>{0b101});
  EXPECT_EQ(cur.ack_batch_index({10, 0}, 3, 3, c).code(), common::ErrorCode::kInvalidArgument);
  ASSERT_TRUE(cur.ack_batch_index({10, 0}, 1, 3, c).is_ok());
  EXPECT_TRUE(cur.is_acknowledged({10, 0}));
  EXPECT_EQ(cur.mark_delete_position(), (Position{10, 0}));
  EXPECT_TRUE(cur.batch_acks({10, 0}).empty());
}

TEST(CursorTest, StateRoundTripsThroughItsEncoding) {
  LedgerChain c = chain();
  Cursor cur("sub", {10, -1}, true);
  ASSERT_TRUE(cur.ack({10, 0}, c).is_ok());
  ASSERT_TRUE(cur.ack({10, 2}, c).is_ok());
  ASSERT_TRUE(cur.ack({10, 3}, c).is_ok());
  ASSERT_TRUE(cur.ack({12, 1}, c).is_ok());
  ASSERT_TRUE(cur.ack_batch_index({10, 4}, 70, 100, c).is_ok());
  auto back = Cursor::decode("sub", cur.encode());
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->mark_delete_position(), (Position{10, 0}));
  EXPECT_EQ(back->individually_acknowledged().ranges(), cur.individually_acknowledged().ranges());
  EXPECT_EQ(back->batch_acks({10, 4}), cur.batch_acks({10, 4}));
  EXPECT_EQ(back->backlog_entries(c), cur.backlog_entries(c));
  EXPECT_FALSE(back->replicated());
  EXPECT_EQ(Cursor::decode("sub", "garbage").status().code(), common::ErrorCode::kCorruption);
  // A replicated subscription stays one, reset or not.
  cur.set_replicated(true);
  cur.reset({12, 0});
  auto replicated = Cursor::decode("sub", cur.encode());
  ASSERT_TRUE(replicated.is_ok());
  EXPECT_TRUE(replicated->replicated());
  EXPECT_EQ(replicated->mark_delete_position(), (Position{12, 0}));
}

// A consumer that acknowledges every other entry of a long backlog leaves one
// hole per entry. The record keeps the 10,000 ranges nearest the mark-delete
// position; the acknowledgements after them are redelivered after a restart,
// never taken for acknowledged.
TEST(CursorTest, PersistedRangesAreBoundedAndTheRestIsRedelivered) {
  constexpr EntryId kEntries = 100'001;
  LedgerChain c;
  c.append({30, kEntries});
  Cursor cur("sub", {30, -1}, true);
  for (EntryId e = 1; e < kEntries; e += 2) ASSERT_TRUE(cur.ack({30, e}, c).is_ok());
  ASSERT_EQ(cur.individually_acknowledged().ranges().size(), 50'000u);

  const std::string bytes = cur.encode();
  EXPECT_LT(bytes.size(), 10'000u * 24 + 4096);  // an AckRange is 24 bytes
  auto back = Cursor::decode("sub", bytes);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->mark_delete_position(), (Position{30, -1}));
  const auto persisted = back->individually_acknowledged().ranges();
  const auto all = cur.individually_acknowledged().ranges();
  ASSERT_EQ(persisted.size(), 10'000u);
  EXPECT_TRUE(std::equal(persisted.begin(), persisted.end(), all.begin()));
  const EntryId last_persisted = persisted.back().last;
  EXPECT_EQ(last_persisted, 19'999);
  for (EntryId e = 0; e < kEntries; ++e) {
    ASSERT_EQ(back->is_acknowledged({30, e}), e % 2 == 1 && e <= last_persisted) << "entry " << e;
  }
  EXPECT_EQ(back->backlog_entries(c), static_cast<uint64_t>(kEntries) - 10'000);
  EXPECT_EQ(back->next_unacknowledged({30, last_persisted - 1}, c), (Position{30, last_persisted + 1}));

  // The restored cursor goes on from there: filling the first hole moves the
  // mark-delete position over the persisted ranges only.
  ASSERT_TRUE(back->ack({30, 0}, c).is_ok());
  EXPECT_EQ(back->mark_delete_position(), (Position{30, 1}));
}

TEST(CursorTest, PersistLimitsCountRangesAcrossLedgersAndBatchEntries) {
  LedgerChain c;
  c.append({50, 10});
  c.append({51, 10});
  Cursor cur("sub", {50, -1}, true);
  // Ranges 50:2-3, 50:9 + 51:0 (two ranges: ledgers differ), 51:4, 51:6.
  for (Position p : {Position{50, 2}, {50, 3}, {50, 9}, {51, 0}, {51, 4}, {51, 6}}) ASSERT_TRUE(cur.ack(p, c).is_ok());
  for (EntryId e : {5, 7}) ASSERT_TRUE(cur.ack_batch_index({50, e}, 1, 4, c).is_ok());
  ASSERT_TRUE(cur.ack_batch_index({51, 8}, 0, 4, c).is_ok());

  CursorPersistLimits limits;
  limits.max_ranges = 3;
  limits.max_batch_entries = 1;
  auto back = Cursor::decode("sub", cur.encode(limits));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->individually_acknowledged().ranges(),
            (std::vector<RangeSet::Range>{{50, 2, 3}, {50, 9, 9}, {51, 0, 0}}));
  EXPECT_FALSE(back->is_acknowledged({51, 4}));
  EXPECT_FALSE(back->is_acknowledged({51, 6}));
  EXPECT_EQ(back->batch_acks({50, 5}), std::vector<uint64_t>{0b10});
  EXPECT_TRUE(back->batch_acks({50, 7}).empty());  // its message 1 comes again
  EXPECT_TRUE(back->batch_acks({51, 8}).empty());
  EXPECT_EQ(back->backlog_entries(c), cur.backlog_entries(c) + 2);

  // A range that crosses the set's internal chunks (4096 entries) is kept whole.
  LedgerChain big;
  big.append({60, 10'000});
  Cursor wide("sub", {60, -1}, true);
  for (EntryId e = 4000; e <= 8200; ++e) ASSERT_TRUE(wide.ack({60, e}, big).is_ok());
  ASSERT_TRUE(wide.ack({60, 9000}, big).is_ok());
  CursorPersistLimits one;
  one.max_ranges = 1;
  auto wide_back = Cursor::decode("sub", wide.encode(one));
  ASSERT_TRUE(wide_back.is_ok());
  EXPECT_EQ(wide_back->individually_acknowledged().ranges(), (std::vector<RangeSet::Range>{{60, 4000, 8200}}));

  // Nothing persisted after the mark-delete position: exactly that.
  limits.max_ranges = 0;
  limits.max_batch_entries = 0;
  back = Cursor::decode("sub", cur.encode(limits));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back->mark_delete_position(), (Position{50, -1}));
  EXPECT_EQ(back->backlog_entries(c), c.total_entries());
}

TEST(CursorTest, SkipsLedgersRemovedFromTheChain) {
  LedgerChain c = chain();
  Cursor cur("sub", {10, 1}, true);
  ASSERT_TRUE(cur.ack({10, 3}, c).is_ok());
  c.drop_front(2);  // 10 and 11 trimmed
  cur.skip_removed_ledgers(c);
  EXPECT_EQ(cur.mark_delete_position(), (Position{12, -1}));
  EXPECT_TRUE(cur.individually_acknowledged().empty());
  EXPECT_EQ(cur.backlog_entries(c), 3u);
}

TEST(CursorTest, MessageBacklogIsExactWithBatches) {
  // Ledger 20: entries holding 1, 1, 5, 5, 1 messages; ledger 21: 3, 3.
  LedgerChain c;
  c.append({20, 5});
  for (uint32_t m : {1u, 1u, 5u, 5u, 1u}) c.back().record_entry(m);
  c.append({21, 2});
  for (uint32_t m : {3u, 3u}) c.back().record_entry(m);
  EXPECT_EQ(c.back().runs, (std::vector<MessageRun>{{3, 2}}));
  EXPECT_EQ(c.total_messages(), 19u);
  EXPECT_EQ(c.messages_before({20, 3}), 7u);
  EXPECT_EQ(c.messages_before({21, 0}), 13u);
  Cursor cur("sub", {20, -1}, true);
  EXPECT_EQ(cur.backlog_messages(c), 19u);
  ASSERT_TRUE(cur.ack({20, 0}, c).is_ok());       // -1, mark-delete moves
  ASSERT_TRUE(cur.ack({20, 3}, c).is_ok());       // -5, individually
  ASSERT_TRUE(cur.ack_batch_index({20, 2}, 4, 5, c).is_ok());  // -1 of a batch
  ASSERT_TRUE(cur.ack({21, 1}, c).is_ok());       // -3
  EXPECT_EQ(cur.backlog_messages(c), 9u);
  EXPECT_EQ(cur.backlog_entries(c), 4u);
}

}  // namespace
}  // namespace magnetar::ledger
