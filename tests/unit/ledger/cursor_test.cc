#include "ledger/cursor.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(Cursor::decode("sub", "garbage").status().code(), common::ErrorCode::kCorruption);
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
