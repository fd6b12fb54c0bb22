#include "ledger/non_persistent_log.h"

#include <gtest/gtest.h>

namespace magnetar::ledger {
namespace {

using common::Result;
using common::Slice;

// Off a reactor the log answers inline, which keeps these tests synchronous.
Position add(Log& log, const std::string& payload, uint32_t messages = 1) {
  Position p;
  MessageHeader h;
  h.messages = messages;
  log.add_entry(h, Slice::copy_of(payload), [&](Result<AppendedEntry> r) {
    ASSERT_TRUE(r.is_ok());
    p = r->position;
  });
  return p;
}

std::vector<LedgerEntry> read(Log& log, Position after, size_t max = 100) {
  std::vector<LedgerEntry> out;
  log.read_entries(after, max, [&](Result<std::vector<LedgerEntry>> r) {
    ASSERT_TRUE(r.is_ok());
    out = std::move(r.value());
  });
  return out;
}

Cursor* open(Log& log, const std::string& name) {
  Cursor* c = nullptr;
  log.open_cursor(name, true, [&](Result<Cursor*> r) { c = r.value_or(nullptr); });
  return c;
}

TEST(NonPersistentLogTest, KeepsTheNewestEntriesWithinCapacity) {
  NonPersistentLog log("np", 5, 1 << 20);
  for (int i = 0; i < 8; ++i) add(log, "e" + std::to_string(i), 2);
  EXPECT_EQ(log.next_message_index(), 16);
  EXPECT_EQ(log.first_held(), 3);
  auto all = read(log, Position{0, -1});
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all.front().payload.to_string(), "e3");
  EXPECT_EQ(all.front().header.first_index, 6);
  auto tail = read(log, Position{NonPersistentLog::kLedgerId, 5}, 1);
  ASSERT_EQ(tail.size(), 1u);
  EXPECT_EQ(tail.front().position.entry, 6);
  EXPECT_TRUE(read(log, log.last_confirmed()).empty());
}

TEST(NonPersistentLogTest, BytesBoundTheRingToo) {
  NonPersistentLog log("np", 1000, 10);
  for (int i = 0; i < 5; ++i) add(log, "abcd");
  EXPECT_LE(log.held_bytes(), 10u);
  EXPECT_EQ(read(log, Position{0, -1}).size(), 2u);
}

TEST(NonPersistentLogTest, SlowCursorsAreMovedPastWhatIsGone) {
  NonPersistentLog log("np", 3, 1 << 20);
  Cursor* slow = open(log, "slow");
  ASSERT_NE(slow, nullptr);
  EXPECT_FALSE(slow->durable());
  for (int i = 0; i < 2; ++i) add(log, "x");
  EXPECT_EQ(slow->backlog_entries(log.chain()), 2u);
  for (int i = 0; i < 4; ++i) add(log, "y");
  EXPECT_EQ(slow->backlog_entries(log.chain()), 3u);
  EXPECT_EQ(slow->mark_delete_position(), (Position{NonPersistentLog::kLedgerId, 2}));
  ASSERT_TRUE(log.ack("slow", Position{NonPersistentLog::kLedgerId, 3}).is_ok());
  EXPECT_EQ(slow->backlog_entries(log.chain()), 2u);
  ASSERT_TRUE(log.ack("slow", Position{NonPersistentLog::kLedgerId, 0}).is_ok());  // gone already
}

TEST(NonPersistentLogTest, ClosedLogRefusesAdds) {
  NonPersistentLog log("np", 3, 1 << 20);
  log.close([](common::Status st) { EXPECT_TRUE(st.is_ok()); });
  bool refused = false;
  log.add_entry(MessageHeader{}, Slice::copy_of("z"), [&](Result<AppendedEntry> r) { refused = !r.is_ok(); });
  EXPECT_TRUE(refused);
}

TEST(NonPersistentLogTest, CursorsResetAndDeleteInMemory) {
  NonPersistentLog log("np", 100, 1 << 20);
  Cursor* c = open(log, "s");
  ASSERT_NE(c, nullptr);
  std::vector<Position> pos;
  for (int i = 0; i < 4; ++i) pos.push_back(add(log, "x"));
  EXPECT_EQ(c->backlog_entries(log.chain()), 4u);
  common::Status st;
  log.reset_cursor("s", pos[2], [&](common::Status s2) { st = s2; });
  EXPECT_TRUE(st.is_ok());
  EXPECT_EQ(c->backlog_entries(log.chain()), 1u);
  log.reset_cursor("nope", pos[0], [&](common::Status s2) { st = s2; });
  EXPECT_EQ(st.code(), common::ErrorCode::kNotFound);
  EXPECT_EQ(log.cursor_names(), std::vector<std::string>{"s"});
  log.delete_cursor("s", [&](common::Status s2) { st = s2; });
  EXPECT_TRUE(st.is_ok());
  EXPECT_EQ(log.cursor("s"), nullptr);
  EXPECT_TRUE(log.cursor_names().empty());
  log.delete_cursor("s", [&](common::Status s2) { st = s2; });
  EXPECT_EQ(st.code(), common::ErrorCode::kNotFound);
}

}  // namespace
}  // namespace magnetar::ledger
