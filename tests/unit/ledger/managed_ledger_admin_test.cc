// Cursor operations an administrator runs on a managed ledger: persisted
// resets, cursor deletion, cursors recovered at open, expiry of one cursor
// and deleting the whole log.
#include "utils/ledger_fixture.h"

#include <algorithm>
#include <thread>

namespace magnetar::ledger {
namespace {

using common::Result;
using common::Slice;
using common::Status;

class ManagedLedgerAdminTest : public ManagedLedgerFixture {};

TEST_F(ManagedLedgerAdminTest, DurableCursorsAreRecoveredWhenTheLogOpens) {
  auto ml = open("a1");
  ASSERT_NE(ml, nullptr);
  ASSERT_TRUE((on_reactor<Result<Cursor*>>([&](auto done) { ml->open_cursor("durable", true, done); }).is_ok()));
  ASSERT_TRUE((on_reactor<Result<Cursor*>>([&](auto done) { ml->open_cursor("reader", false, done); }).is_ok()));
  ASSERT_TRUE(on_reactor<Status>([&](auto done) { ml->flush_cursors(done); }).is_ok());
  ASSERT_TRUE(on_reactor<Status>([&](auto done) { ml->close(done); }).is_ok());
  auto again = open("a1");
  ASSERT_NE(again, nullptr);
  // Known before anyone opens it again; the reader was never persisted.
  auto names = reactor_.run_sync([&] { return again->cursor_names(); });
  EXPECT_EQ(names, std::vector<std::string>{"durable"});
}

TEST_F(ManagedLedgerAdminTest, ResetCursorIsPersistedBeforeItCompletes) {
  auto ml = open("a2");
  ASSERT_NE(ml, nullptr);
  auto cur = on_reactor<Result<Cursor*>>([&](auto done) { ml->open_cursor("sub", true, done); });
  ASSERT_TRUE(cur.is_ok());
  std::vector<Position> pos;
  for (int i = 0; i < 6; ++i) pos.push_back(*add(*ml, "x"));
  reactor_.run_sync([&] {
    EXPECT_TRUE(ml->ack_cumulative("sub", pos[4]).is_ok());
    EXPECT_EQ((*cur)->backlog_entries(ml->chain()), 1u);
  });
  // Back to before the second entry: five entries to read again.
  ASSERT_TRUE(on_reactor<Status>([&](auto done) { ml->reset_cursor("sub", pos[0], done); }).is_ok());
  reactor_.run_sync([&] { EXPECT_EQ((*cur)->backlog_entries(ml->chain()), 5u); });
  EXPECT_EQ(on_reactor<Status>([&](auto done) { ml->reset_cursor("nope", pos[0], done); }).code(),
            common::ErrorCode::kNotFound);

  // Another owner takes the log over without a clean close: the reset was
  // already in the store when reset_cursor completed.
  auto again = open("a2");
  ASSERT_NE(again, nullptr);
  reactor_.run_sync([&] {
    Cursor* c = again->cursor("sub");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->mark_delete_position(), pos[0]);
    EXPECT_EQ(c->backlog_entries(again->chain()), 5u);
  });
}

TEST_F(ManagedLedgerAdminTest, ResetForwardDropsAcknowledgementsBehindIt) {
  auto ml = open("a3");
  ASSERT_NE(ml, nullptr);
  ASSERT_TRUE((on_reactor<Result<Cursor*>>([&](auto done) { ml->open_cursor("sub", true, done); }).is_ok()));
  std::vector<Position> pos;
  for (int i = 0; i < 4; ++i) pos.push_back(*add(*ml, "x"));
  reactor_.run_sync([&] { EXPECT_TRUE(ml->ack("sub", pos[3]).is_ok()); });
  ASSERT_TRUE(on_reactor<Status>([&](auto done) { ml->reset_cursor("sub", ml->last_confirmed(), done); }).is_ok());
  reactor_.run_sync([&] { EXPECT_EQ(ml->cursor("sub")->backlog_entries(ml->chain()), 0u); });
}

TEST_F(ManagedLedgerAdminTest, DeletedCursorIsGoneAfterAReopen) {
  auto ml = open("a4");
  ASSERT_NE(ml, nullptr);
  ASSERT_TRUE((on_reactor<Result<Cursor*>>([&](auto done) { ml->open_cursor("keep", true, done); }).is_ok()));
  ASSERT_TRUE((on_reactor<Result<Cursor*>>([&](auto done) { ml->open_cursor("drop", true, done); }).is_ok()));
  ASSERT_TRUE(add(*ml, "x").is_ok());
  reactor_.run_sync([&] { EXPECT_TRUE(ml->ack("drop", ml->last_confirmed()).is_ok()); });  // a write in flight
  ASSERT_TRUE(on_reactor<Status>([&](auto done) { ml->delete_cursor("drop", done); }).is_ok());
  EXPECT_EQ(on_reactor<Status>([&](auto done) { ml->delete_cursor("drop", done); }).code(),
            common::ErrorCode::kNotFound);
  EXPECT_EQ(reactor_.run_sync([&] { return ml->cursor_names(); }), std::vector<std::string>{"keep"});
  ASSERT_TRUE(on_reactor<Status>([&](auto done) { ml->close(done); }).is_ok());
  auto again = open("a4");
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(reactor_.run_sync([&] { return again->cursor_names(); }), std::vector<std::string>{"keep"});
}

TEST_F(ManagedLedgerAdminTest, ExpireCursorAcknowledgesOnlyOldMessagesOfThatCursor) {
  auto ml = open("a5");
  ASSERT_NE(ml, nullptr);
  ASSERT_TRUE((on_reactor<Result<Cursor*>>([&](auto done) { ml->open_cursor("old", true, done); }).is_ok()));
  ASSERT_TRUE((on_reactor<Result<Cursor*>>([&](auto done) { ml->open_cursor("other", true, done); }).is_ok()));
  // Publish times are given explicitly: no wall clock in the assertions.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(add(*ml, "x", 1, 1000 + i).is_ok());
  ASSERT_TRUE(on_reactor<Status>([&](auto done) { ml->expire_cursor("old", 1003, done); }).is_ok());
  reactor_.run_sync([&] {
    EXPECT_EQ(ml->cursor("old")->backlog_entries(ml->chain()), 2u);
    EXPECT_EQ(ml->cursor("other")->backlog_entries(ml->chain()), 5u);
  });
  // Everything is older than this: the whole backlog expires.
  ASSERT_TRUE(on_reactor<Status>([&](auto done) { ml->expire_cursor("old", 999999, done); }).is_ok());
  reactor_.run_sync([&] { EXPECT_EQ(ml->cursor("old")->backlog_entries(ml->chain()), 0u); });
  EXPECT_EQ(on_reactor<Status>([&](auto done) { ml->expire_cursor("nope", 1, done); }).code(),
            common::ErrorCode::kNotFound);
}

TEST_F(ManagedLedgerAdminTest, DeleteLogRemovesItsMetadataAndLedgers) {
  ManagedLedgerConfig config;
  config.max_entries_per_ledger = 2;
  auto ml = open("a6", config);
  ASSERT_NE(ml, nullptr);
  ASSERT_TRUE((on_reactor<Result<Cursor*>>([&](auto done) { ml->open_cursor("sub", true, done); }).is_ok()));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(add(*ml, "x").is_ok());
  std::vector<LedgerId> ids;
  for (const auto& l : ml->chain().ledgers()) ids.push_back(l.id);
  ASSERT_GE(ids.size(), 2u);
  ASSERT_TRUE(on_reactor<Status>([&](auto done) { ml->delete_log(done); }).is_ok());
  EXPECT_FALSE(add(*ml, "late").is_ok());
  auto children = on_reactor<Result<std::vector<std::string>>>(
      [&](auto done) { store_->list_children("/managed-ledgers", done); });
  ASSERT_TRUE(children.is_ok());
  EXPECT_EQ(std::count(children->begin(), children->end(), "a6"), 0);
  // Re-created under the same name: an empty log without the old cursor.
  auto fresh = open("a6", config);
  ASSERT_NE(fresh, nullptr);
  EXPECT_EQ(fresh->chain().total_entries(), 0u);
  EXPECT_TRUE(reactor_.run_sync([&] { return fresh->cursor_names(); }).empty());
  // The old ledgers are gone from storage (deletes run behind the reply).
  for (LedgerId id : ids) {
    Status st;
    for (int attempt = 0; attempt < 200; ++attempt) {
      st = on_reactor<Status>([&](auto done) {
        storage_->read_entries(id, 0, 0, [done](Result<std::vector<storage::Entry>> r) { done(r.status()); });
      });
      if (!st.is_ok()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_FALSE(st.is_ok()) << "ledger " << id << " still readable";
  }
}

}  // namespace
}  // namespace magnetar::ledger
