#include <cstdio>
#include <future>
#include <optional>
#include <thread>

#include "common/metrics.h"
#include "common/stage_timing.h"
#include "ledger/add_timing.h"
#include "storage/segment.h"
#include "utils/ledger_fixture.h"

namespace magnetar::ledger {
namespace {

using common::Result;
using common::Slice;
using common::Status;

class ManagedLedgerTest : public ManagedLedgerFixture {};

TEST_F(ManagedLedgerTest, AddsAndReadsAcrossRollovers) {
  ManagedLedgerConfig config;
  config.max_entries_per_ledger = 10;
  auto ml = open("t1", config);
  ASSERT_NE(ml, nullptr);
  for (int i = 0; i < 35; ++i) ASSERT_TRUE(add(*ml, "m" + std::to_string(i), 2).is_ok());
  EXPECT_GE(ml->chain().ledgers().size(), 4u);
  EXPECT_EQ(ml->chain().total_entries(), 35u);
  EXPECT_EQ(ml->next_message_index(), 70);
  auto all = read_all(*ml, Position{0, -1});
  ASSERT_EQ(all.size(), 35u);
  for (int i = 0; i < 35; ++i) {
    EXPECT_EQ(all[i].payload.to_string(), "m" + std::to_string(i));
    EXPECT_EQ(all[i].header.first_index, 2 * i);
    EXPECT_EQ(all[i].header.producer, "p");
  }
}

TEST_F(ManagedLedgerTest, ReopeningContinuesTheLogAndFencesTheOldOwner) {
  auto first = open("t2");
  ASSERT_NE(first, nullptr);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(add(*first, "a" + std::to_string(i)).is_ok());
  auto second = open("t2");
  ASSERT_NE(second, nullptr);
  // The old owner's ledger was sealed: its adds fail from now on.
  auto refused = add(*first, "late");
  EXPECT_FALSE(refused.is_ok());
  EXPECT_EQ(second->next_message_index(), 5);
  ASSERT_TRUE(add(*second, "b0").is_ok());
  auto all = read_all(*second, Position{0, -1});
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(all[5].payload.to_string(), "b0");
  EXPECT_EQ(all[5].header.first_index, 5);
}

// The old owner learns of the new one from its next add and stops for good:
// no new ledger, no chain write, every later add refused as fenced, so the
// new owner's rollovers and close go through.
TEST_F(ManagedLedgerTest, AnOwnerFencedByANewOneTakesNoMoreAddsAndLeavesTheChainAlone) {
  auto& taken = common::MetricsRegistry::global().counter("magnetar_ledger_taken_over_total", "");
  const uint64_t taken_before = taken.value();
  ManagedLedgerConfig config;
  config.max_entries_per_ledger = 4;
  auto first = open("t2b", config);
  ASSERT_NE(first, nullptr);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(add(*first, "a" + std::to_string(i)).is_ok());
  auto second = open("t2b", config);
  ASSERT_NE(second, nullptr);
  const auto ledgers = storage_->list_ledgers();
  auto refused = add(*first, "late");
  EXPECT_EQ(refused.status().code(), common::ErrorCode::kFenced) << refused.status().to_string();
  auto again = add(*first, "again");
  EXPECT_EQ(again.status().code(), common::ErrorCode::kFenced) << again.status().to_string();
  EXPECT_EQ(taken.value(), taken_before + 1);
  EXPECT_EQ(storage_->list_ledgers(), ledgers);  // the old owner made no ledger
  reactor_.run_sync([&] { EXPECT_EQ(first->chain().ledgers().size(), 1u); });
  EXPECT_TRUE(on_reactor<Status>([&](auto done) { first->close(done); }).is_ok());
  // The new owner rolls over (chain writes on its own version) and closes.
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(add(*second, "b" + std::to_string(i)).is_ok());
  reactor_.run_sync([&] { EXPECT_GE(second->chain().ledgers().size(), 3u); });
  ASSERT_TRUE(on_reactor<Status>([&](auto done) { second->close(done); }).is_ok());
  auto third = open("t2b", config);
  ASSERT_NE(third, nullptr);
  auto all = read_all(*third, Position{0, -1});
  ASSERT_EQ(all.size(), 9u);
  EXPECT_EQ(all[2].payload.to_string(), "a2");
  EXPECT_EQ(all[3].payload.to_string(), "b0");
  EXPECT_EQ(all[8].payload.to_string(), "b5");
}

TEST_F(ManagedLedgerTest, DurableCursorsSurviveAReopen) {
  auto ml = open("t3");
  ASSERT_NE(ml, nullptr);
  auto cur = on_reactor<Result<Cursor*>>([&](auto done) { ml->open_cursor("sub", true, done); });
  ASSERT_TRUE(cur.is_ok());
  std::vector<Position> pos;
  for (int i = 0; i < 6; ++i) pos.push_back(*add(*ml, "x"));
  reactor_.run_sync([&] {
    EXPECT_TRUE(ml->ack("sub", pos[0]).is_ok());
    EXPECT_TRUE(ml->ack("sub", pos[2]).is_ok());
    EXPECT_TRUE(ml->ack("sub", pos[3]).is_ok());
    EXPECT_EQ((*cur)->backlog_entries(ml->chain()), 3u);
  });
  ASSERT_TRUE(on_reactor<Status>([&](auto done) { ml->close(done); }).is_ok());
  auto again = open("t3");
  ASSERT_NE(again, nullptr);
  auto restored = on_reactor<Result<Cursor*>>([&](auto done) { again->open_cursor("sub", true, done); });
  ASSERT_TRUE(restored.is_ok());
  reactor_.run_sync([&] {
    EXPECT_EQ((*restored)->mark_delete_position(), pos[0]);
    EXPECT_TRUE((*restored)->is_acknowledged(pos[3]));
    EXPECT_FALSE((*restored)->is_acknowledged(pos[1]));
    EXPECT_EQ((*restored)->backlog_entries(again->chain()), 3u);
  });
}

// Bytes overwritten on disk cost the entries they touch, nothing more: a
// reader gets every other entry, every cursor acknowledges the damaged one
// (so backlogs drain and retention moves on), and it is counted once.
TEST_F(ManagedLedgerTest, ADamagedEntryIsSkippedAndAcknowledgedForEveryCursor) {
  auto ml = open("damaged");
  ASSERT_NE(ml, nullptr);
  ASSERT_TRUE(on_reactor<Result<Cursor*>>([&](auto done) { ml->open_cursor("sub", true, done); }).is_ok());
  std::vector<Position> pos;
  for (int i = 0; i < 30; ++i) pos.push_back(*add(*ml, "payload-" + std::to_string(i) + std::string(200, 'x')));
  ASSERT_TRUE(on_reactor<Status>([&](auto done) { ml->close(done); }).is_ok());
  ml.reset();
  restart_storage([&](const std::string& dir) {
    // Flip one byte inside entry 10's record.
    const std::string segments = dir + "/segments";
    auto ids = storage::list_segments(segments);
    ASSERT_TRUE(ids.is_ok());
    for (uint64_t id : *ids) {
      std::optional<uint64_t> at;
      auto scanned = storage::scan_segment(segments, id, 0, [&](const storage::ScannedRecord& rec) {
        if (rec.header.type == storage::format::RecordType::kEntry && rec.header.ledger == pos[10].ledger &&
            rec.header.entry == pos[10].entry) {
          at = rec.offset + rec.size - 20;
        }
      });
      ASSERT_TRUE(scanned.is_ok());
      if (!at) continue;
      FILE* f = std::fopen(storage::segment_path(segments, id).c_str(), "r+b");
      ASSERT_NE(f, nullptr);
      std::fseek(f, static_cast<long>(*at), SEEK_SET);
      std::fputc('#', f);
      std::fclose(f);
    }
  });
  ml = open("damaged");
  ASSERT_NE(ml, nullptr);
  auto all = read_all(*ml, Position{0, -1});
  ASSERT_EQ(all.size(), 29u);
  for (size_t i = 0, want = 0; i < all.size(); ++i, ++want) {
    if (want == 10) ++want;
    EXPECT_EQ(all[i].position, pos[want]);
    EXPECT_EQ(all[i].payload.to_string(), "payload-" + std::to_string(want) + std::string(200, 'x'));
  }
  EXPECT_EQ(ml->damaged_entries(), 1u);
  reactor_.run_sync([&] {
    Cursor* cur = ml->cursor("sub");
    ASSERT_NE(cur, nullptr);
    EXPECT_TRUE(cur->is_acknowledged(pos[10]));
    EXPECT_FALSE(cur->is_acknowledged(pos[9]));
    EXPECT_EQ(cur->backlog_entries(ml->chain()), 29u);
  });
  // Reading again skips it again without counting it twice.
  EXPECT_EQ(read_all(*ml, Position{0, -1}).size(), 29u);
  EXPECT_EQ(ml->damaged_entries(), 1u);
}

// A full storage queue holds adds back; it neither fails them nor rolls the
// topic over to a new ledger (which used to churn ledgers and metadata).
TEST_F(ManagedLedgerTest, AFullStorageQueueHoldsAddsBackInOrder) {
  restart_storage([&](const std::string&) { storage_options_.max_queued_entries = 8; });
  auto ml = open("overload");
  ASSERT_NE(ml, nullptr);
  const size_t ledgers_before = ml->chain().ledgers().size();
  constexpr int kAdds = 400;
  std::vector<Result<AppendedEntry>> results(kAdds, Status::internal("no answer"));
  auto all_done = std::make_shared<std::promise<void>>();
  auto left = std::make_shared<int>(kAdds);
  reactor_.run_sync([&] {
    for (int i = 0; i < kAdds; ++i) {
      MessageHeader h;
      h.producer = "p";
      ml->add_entry(h, Slice::copy_of("m" + std::to_string(i)), [&, i, left, all_done](Result<AppendedEntry> r) {
        results[i] = std::move(r);
        if (--*left == 0) all_done->set_value();
      });
    }
  });
  ASSERT_EQ(all_done->get_future().wait_for(kWait), std::future_status::ready);
  for (int i = 0; i < kAdds; ++i) {
    ASSERT_TRUE(results[i].is_ok()) << "add " << i << ": " << results[i].status().to_string();
    if (i > 0) {
      EXPECT_EQ(results[i]->position.entry, results[i - 1]->position.entry + 1);
    }
    EXPECT_EQ(results[i]->first_index, i);
  }
  EXPECT_EQ(ml->chain().ledgers().size(), ledgers_before);
  auto all = read_all(*ml, Position{0, -1});
  ASSERT_EQ(all.size(), static_cast<size_t>(kAdds));
  for (int i = 0; i < kAdds; ++i) EXPECT_EQ(all[i].payload.to_string(), "m" + std::to_string(i));
  EXPECT_EQ(ml->next_message_index(), kAdds);
}

TEST_F(ManagedLedgerTest, AnAddsCallbackSeesWhereItsTimeWent) {
  auto& queued = common::MetricsRegistry::global().histogram(
      "magnetar_storage_journal_stage_seconds", "", common::stage_latency_bounds(), {{"stage", "queue"}});
  auto& completed = common::MetricsRegistry::global().histogram(
      "magnetar_storage_journal_stage_seconds", "", common::stage_latency_bounds(), {{"stage", "complete"}});
  const uint64_t queued_before = queued.count();
  const uint64_t completed_before = completed.count();
  auto ml = open("timed");
  ASSERT_NE(ml, nullptr);
  std::promise<std::optional<AddTiming>> seen;
  const int64_t before = common::monotonic_ns();
  reactor_.run_sync([&] {
    EXPECT_EQ(current_add_timing(), nullptr);
    MessageHeader h;
    h.producer = "p";
    ml->add_entry(h, Slice::copy_of("m"), [&](Result<AppendedEntry> r) {
      EXPECT_TRUE(r.is_ok());
      const AddTiming* t = current_add_timing();
      seen.set_value(t != nullptr ? std::optional<AddTiming>(*t) : std::nullopt);
    });
  });
  auto future = seen.get_future();
  ASSERT_EQ(future.wait_for(kWait), std::future_status::ready);
  std::optional<AddTiming> t = future.get();
  ASSERT_TRUE(t.has_value());
  EXPECT_LE(before, t->accepted_ns);
  EXPECT_LE(t->accepted_ns, t->sent_ns);
  EXPECT_LE(t->sent_ns, t->stored_ns);
  EXPECT_LE(t->stored_ns, common::monotonic_ns());
  reactor_.run_sync([&] { EXPECT_EQ(current_add_timing(), nullptr); });
  // The journal measured the same add (and the ledger's own records).
  EXPECT_GT(queued.count(), queued_before);
  EXPECT_GT(completed.count(), completed_before);
}

// Adds taken while the ledger rolls over wait for the next ledger; each
// completes with the first index it was given then, not the one the log
// showed when it was called.
TEST_F(ManagedLedgerTest, AddsWaitingThroughRolloversReportTheIndexTheyWereGiven) {
  ManagedLedgerConfig config;
  config.max_entries_per_ledger = 1;  // every add rolls the ledger over
  auto ml = open("waiting-adds", config);
  ASSERT_NE(ml, nullptr);
  constexpr int kAdds = 20;
  std::vector<Result<AppendedEntry>> results(kAdds, Status::internal("no answer"));
  std::vector<int64_t> index_when_called(kAdds, -1);
  auto all_done = std::make_shared<std::promise<void>>();
  auto left = std::make_shared<int>(kAdds);
  reactor_.run_sync([&] {
    for (int i = 0; i < kAdds; ++i) {
      MessageHeader h;
      h.producer = "p";
      h.messages = 3;
      index_when_called[i] = ml->next_message_index();
      ml->add_entry(h, Slice::copy_of("m" + std::to_string(i)), [&, i, left, all_done](Result<AppendedEntry> r) {
        results[i] = std::move(r);
        if (--*left == 0) all_done->set_value();
      });
    }
  });
  ASSERT_EQ(all_done->get_future().wait_for(kWait), std::future_status::ready);
  // The adds after the first waited: the index the log showed then was stale.
  EXPECT_EQ(index_when_called[kAdds - 1], 3);
  for (int i = 0; i < kAdds; ++i) {
    ASSERT_TRUE(results[i].is_ok()) << "add " << i << ": " << results[i].status().to_string();
    EXPECT_EQ(results[i]->first_index, 3 * i) << "add " << i;
  }
  auto all = read_all(*ml, Position{0, -1});
  ASSERT_EQ(all.size(), static_cast<size_t>(kAdds));
  for (int i = 0; i < kAdds; ++i) {
    EXPECT_EQ(all[i].position, results[i]->position);
    EXPECT_EQ(all[i].header.first_index, results[i]->first_index);
  }
}

TEST_F(ManagedLedgerTest, TrimDeletesLedgersEveryCursorPassed) {
  ManagedLedgerConfig config;
  config.max_entries_per_ledger = 5;
  auto ml = open("t4", config);
  ASSERT_NE(ml, nullptr);
  auto cur = on_reactor<Result<Cursor*>>([&](auto done) { ml->open_cursor("sub", true, done); });
  ASSERT_TRUE(cur.is_ok());
  std::vector<Position> pos;
  for (int i = 0; i < 12; ++i) pos.push_back(*add(*ml, "y"));
  const LedgerId oldest = ml->chain().ledgers().front().id;
  reactor_.run_sync([&] { ASSERT_TRUE(ml->ack_cumulative("sub", pos[7]).is_ok()); });
  ASSERT_TRUE(on_reactor<Status>([&](auto done) { ml->trim(done); }).is_ok());
  EXPECT_EQ(ml->chain().ledgers().front().id, pos[7].ledger);
  EXPECT_EQ(storage_->ledger_info(oldest).status().code(), common::ErrorCode::kNotFound);
  auto rest = read_all(*ml, (*cur)->mark_delete_position());
  EXPECT_EQ(rest.size(), 4u);
}

TEST_F(ManagedLedgerTest, DeleteBeforeDropsClosedLedgersWhateverCursorsSay) {
  ManagedLedgerConfig config;
  config.max_entries_per_ledger = 5;
  auto ml = open("t4b", config);
  ASSERT_NE(ml, nullptr);
  // A cursor that acknowledged nothing does not hold the prefix back.
  auto cur = on_reactor<Result<Cursor*>>([&](auto done) { ml->open_cursor("sub", true, done); });
  ASSERT_TRUE(cur.is_ok());
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(add(*ml, "z" + std::to_string(i)).is_ok());
  const LedgerId oldest = ml->chain().ledgers().front().id;
  // Index 7 lies in the second ledger [5, 10): only the first goes.
  auto start = on_reactor<Result<int64_t>>([&](auto done) { ml->delete_before(7, done); });
  ASSERT_TRUE(start.is_ok());
  EXPECT_EQ(*start, 5);
  EXPECT_EQ(ml->chain().ledgers().front().first_index, 5);
  EXPECT_EQ(storage_->ledger_info(oldest).status().code(), common::ErrorCode::kNotFound);
  // The cursor moved to the new start; what follows reads back whole.
  auto rest = read_all(*ml, (*cur)->mark_delete_position());
  ASSERT_EQ(rest.size(), 7u);
  EXPECT_EQ(rest.front().payload.to_string(), "z5");
  // Past the end: every closed ledger goes, the current one stays.
  start = on_reactor<Result<int64_t>>([&](auto done) { ml->delete_before(100, done); });
  ASSERT_TRUE(start.is_ok());
  EXPECT_EQ(*start, ml->chain().ledgers().front().first_index);
  EXPECT_EQ(ml->chain().ledgers().size(), 1u);
  // Below the start: nothing to do.
  const int64_t now_start = *start;
  start = on_reactor<Result<int64_t>>([&](auto done) { ml->delete_before(0, done); });
  ASSERT_TRUE(start.is_ok());
  EXPECT_EQ(*start, now_start);
}

TEST_F(ManagedLedgerTest, RetentionKeepsConsumedLedgersUntilItChanges) {
  ManagedLedgerConfig config;
  config.max_entries_per_ledger = 5;
  config.retention_time = std::chrono::milliseconds(-1);
  config.retention_size = -1;
  auto ml = open("t5", config);
  ASSERT_NE(ml, nullptr);
  std::vector<Position> pos;
  for (int i = 0; i < 12; ++i) pos.push_back(*add(*ml, "z"));
  size_t before = ml->chain().ledgers().size();
  ASSERT_GE(before, 3u);
  ASSERT_TRUE(on_reactor<Status>([&](auto done) { ml->trim(done); }).is_ok());
  EXPECT_EQ(ml->chain().ledgers().size(), before);
  // Retention set on the open log applies at the next trim: no cursor holds
  // the ledgers, so all but the current one go.
  reactor_.run_sync([&] { ml->set_retention(std::chrono::milliseconds(0), 0, std::chrono::milliseconds(0)); });
  ASSERT_TRUE(on_reactor<Status>([&](auto done) { ml->trim(done); }).is_ok());
  EXPECT_EQ(ml->chain().ledgers().size(), 1u);
}

// The origin a log was made with stays with it: a later open with another
// origin (another protocol using the topic first after a restart) keeps it.
TEST_F(ManagedLedgerTest, TheOriginALogWasMadeWithIsKeptAcrossReopens) {
  ManagedLedgerConfig made;
  made.origin = 1;
  auto ml = open("origin", made);
  ASSERT_NE(ml, nullptr);
  EXPECT_EQ(ml->origin(), 1);
  ASSERT_TRUE(add(*ml, "o").is_ok());
  ASSERT_TRUE(on_reactor<Status>([&](auto done) { ml->close(done); }).is_ok());
  ml.reset();
  auto again = open("origin", ManagedLedgerConfig{});
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->origin(), 1);
  auto fresh = open("origin-none", ManagedLedgerConfig{});
  ASSERT_NE(fresh, nullptr);
  EXPECT_EQ(fresh->origin(), 0);
}

TEST_F(ManagedLedgerTest, SeeksByMessageIndexAndPublishTime) {
  ManagedLedgerConfig config;
  config.max_entries_per_ledger = 4;
  auto ml = open("t6", config);
  ASSERT_NE(ml, nullptr);
  std::vector<Position> pos;
  for (int i = 0; i < 20; ++i) pos.push_back(*add(*ml, "s", 3, 1000 + 10 * i));  // indexes 3i..3i+2
  auto by_index = on_reactor<Result<Position>>([&](auto done) { ml->seek_by_index(31, done); });
  ASSERT_TRUE(by_index.is_ok());
  EXPECT_EQ(*by_index, pos[10]);
  auto by_time = on_reactor<Result<Position>>([&](auto done) { ml->seek_by_time(1095, done); });
  ASSERT_TRUE(by_time.is_ok());
  EXPECT_EQ(*by_time, pos[10]);
  auto past = on_reactor<Result<Position>>([&](auto done) { ml->seek_by_index(60, done); });
  EXPECT_EQ(past.status().code(), common::ErrorCode::kNotFound);
}

TEST_F(ManagedLedgerTest, NonDurableCursorsStartAtTheEnd) {
  auto ml = open("t7");
  ASSERT_NE(ml, nullptr);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(add(*ml, "n").is_ok());
  auto reader = on_reactor<Result<Cursor*>>([&](auto done) { ml->open_cursor("reader", false, done); });
  ASSERT_TRUE(reader.is_ok());
  EXPECT_FALSE((*reader)->durable());
  reactor_.run_sync([&] { EXPECT_EQ((*reader)->backlog_entries(ml->chain()), 0u); });
  ASSERT_TRUE(add(*ml, "n").is_ok());
  reactor_.run_sync([&] { EXPECT_EQ((*reader)->backlog_entries(ml->chain()), 1u); });
}

TEST_F(ManagedLedgerTest, TtlAcknowledgesExpiredMessagesForSlowCursors) {
  ManagedLedgerConfig config;
  config.max_entries_per_ledger = 3;
  config.ttl = std::chrono::hours(1);
  auto ml = open("t8", config);
  ASSERT_NE(ml, nullptr);
  auto cur = on_reactor<Result<Cursor*>>([&](auto done) { ml->open_cursor("slow", true, done); });
  ASSERT_TRUE(cur.is_ok());
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  std::vector<Position> pos;
  const int64_t two_hours_ago = now - 2 * 3600 * 1000;
  for (int i = 0; i < 5; ++i) pos.push_back(*add(*ml, "old", 1, two_hours_ago));
  for (int i = 0; i < 4; ++i) pos.push_back(*add(*ml, "new", 1, now));
  ASSERT_TRUE(on_reactor<Status>([&](auto done) { ml->expire_messages(done); }).is_ok());
  reactor_.run_sync([&] {
    EXPECT_EQ((*cur)->mark_delete_position(), pos[4]);
    EXPECT_EQ((*cur)->backlog_entries(ml->chain()), 4u);
  });
}

TEST_F(ManagedLedgerTest, MessageBacklogIsExactAcrossATakeover) {
  ManagedLedgerConfig config;
  config.max_entries_per_ledger = 4;
  auto ml = open("t9", config);
  ASSERT_NE(ml, nullptr);
  auto cur = on_reactor<Result<Cursor*>>([&](auto done) { ml->open_cursor("sub", true, done); });
  ASSERT_TRUE(cur.is_ok());
  std::vector<Position> pos;
  for (int i = 0; i < 10; ++i) pos.push_back(*add(*ml, "b", i % 2 == 0 ? 10 : 1));  // 55 messages
  reactor_.run_sync([&] {
    ASSERT_TRUE(ml->ack("sub", pos[0]).is_ok());  // 10
    ASSERT_TRUE(ml->ack("sub", pos[5]).is_ok());  // 1
    ASSERT_TRUE(ml->ack_batch_index("sub", pos[8], 3, 10).is_ok());  // 1
    EXPECT_EQ((*cur)->backlog_messages(ml->chain()), 43u);
  });
  ASSERT_TRUE(on_reactor<Status>([&](auto done) { ml->flush_cursors(done); }).is_ok());
  // A second owner takes over without the first closing: the last ledger's
  // message counts are rebuilt from its entries.
  auto next = open("t9", config);
  ASSERT_NE(next, nullptr);
  auto restored = on_reactor<Result<Cursor*>>([&](auto done) { next->open_cursor("sub", true, done); });
  ASSERT_TRUE(restored.is_ok());
  reactor_.run_sync([&] {
    EXPECT_EQ(next->chain().total_messages(), 55u);
    EXPECT_EQ((*restored)->backlog_messages(next->chain()), 43u);
  });
  EXPECT_EQ(next->next_message_index(), 55);
}

TEST_F(ManagedLedgerTest, MaintenanceRollsAnAgedLedgerOverAndTrims) {
  ManagedLedgerConfig config;
  config.max_ledger_age = std::chrono::milliseconds(0);
  auto ml = open("t10", config);
  ASSERT_NE(ml, nullptr);
  auto cur = on_reactor<Result<Cursor*>>([&](auto done) { ml->open_cursor("sub", true, done); });
  ASSERT_TRUE(cur.is_ok());
  auto p = add(*ml, "aged");  // rolls over right after (age 0)
  ASSERT_TRUE(p.is_ok());
  ASSERT_TRUE(add(*ml, "next").is_ok());
  // "next" rolls its ledger over too: let the new, empty one settle first.
  auto deadline = std::chrono::steady_clock::now() + kWait;
  while (reactor_.run_sync([&] { return ml->chain().back().entries; }) != 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const size_t ledgers = ml->chain().ledgers().size();
  EXPECT_GE(ledgers, 2u);
  reactor_.run_sync([&] { ASSERT_TRUE(ml->ack_cumulative("sub", *p).is_ok()); });
  ASSERT_TRUE(on_reactor<Status>([&](auto done) { ml->maintain(done); }).is_ok());
  EXPECT_EQ(ml->chain().find(p->ledger), nullptr);
  EXPECT_EQ(ml->chain().ledgers().size(), ledgers - 1);
}

}  // namespace
}  // namespace magnetar::ledger
