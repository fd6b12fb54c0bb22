#include "storage/storage_impl.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <future>
#include <thread>

#include "runtime/reactor.h"
#include "storage_test_util.h"

namespace magnetar::storage {
namespace {

using common::ErrorCode;
using common::Slice;
using namespace testing;  // NOLINT: the test helpers

class StorageImplTest : public ::testing::Test {
 protected:
  void start(StorageOptions o) {
    storage_ = make_local_storage(std::move(o));
    auto st = storage_->start();
    ASSERT_TRUE(st.is_ok()) << st.to_string();
  }
  void start() { start(small_options(dir_.path())); }
  void restart(StorageOptions o) {
    storage_->stop();
    storage_.reset();
    start(std::move(o));
  }
  void restart() { restart(small_options(dir_.path())); }

  LedgerWriter create(LedgerId id) {
    auto w = create_ledger(*storage_, id);
    EXPECT_TRUE(w.is_ok()) << w.status().to_string();
    return w.is_ok() ? *w : LedgerWriter{};
  }
  void add(const LedgerWriter& w, EntryId from, EntryId to, size_t size = 100) {
    for (EntryId e = from; e <= to; ++e) {
      auto st = add_entry(*storage_, w, e, Slice::copy_of(entry_payload(w.ledger, e, size)));
      ASSERT_TRUE(st.is_ok()) << st.to_string();
    }
  }
  void expect_entries(LedgerId id, EntryId from, EntryId to, size_t size = 100) {
    auto got = read_all(*storage_, id, from, to);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    ASSERT_EQ(got->size(), static_cast<size_t>(to - from + 1));
    for (EntryId e = from; e <= to; ++e) {
      const Entry& entry = (*got)[static_cast<size_t>(e - from)];
      EXPECT_EQ(entry.id, e);
      EXPECT_EQ(entry.data.to_string(), entry_payload(id, e, size)) << "entry " << id << ":" << e;
    }
  }
  std::vector<uint64_t> segments() { return list_segments(dir_.path() + "/segments").value_or({}); }

  TempDir dir_;
  std::unique_ptr<Storage> storage_;
};

TEST_F(StorageImplTest, AddThenReadBack) {
  start();
  auto w = create(1);
  add(w, 0, 99);
  EXPECT_EQ(*storage_->last_confirmed(1), 99);
  expect_entries(1, 0, 99);
  expect_entries(1, 42, 42);
}

TEST_F(StorageImplTest, CreateTwiceIsAlreadyExists) {
  start();
  create(1);
  EXPECT_EQ(create_ledger(*storage_, 1).status().code(), ErrorCode::kAlreadyExists);
}

TEST_F(StorageImplTest, EntriesMustComeInOrder) {
  start();
  auto w = create(1);
  EXPECT_EQ(add_entry(*storage_, w, 1, Slice::copy_of("x")).code(), ErrorCode::kInvalidArgument);
  add(w, 0, 0);
  EXPECT_EQ(add_entry(*storage_, w, 0, Slice::copy_of("x")).code(), ErrorCode::kInvalidArgument);
  add(w, 1, 1);
}

TEST_F(StorageImplTest, ReadsBeyondLastConfirmedAreRefused) {
  start();
  auto w = create(1);
  add(w, 0, 4);
  EXPECT_EQ(read_entries(*storage_, 1, 3, 5).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(read_entries(*storage_, 1, 3, 2).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(read_entries(*storage_, 2, 0, 0).status().code(), ErrorCode::kNotFound);
}

TEST_F(StorageImplTest, ASecondWriterIsFenced) {
  start();
  auto w = create(1);
  EXPECT_EQ(open_ledger(*storage_, 1).status().code(), ErrorCode::kFenced);
  LedgerWriter impostor{1, w.token + 1000};
  EXPECT_EQ(add_entry(*storage_, impostor, 0, Slice::copy_of("x")).code(), ErrorCode::kFenced);
  add(w, 0, 0);
}

TEST_F(StorageImplTest, CloseSealsTheLedgerAndFencesItsWriter) {
  start();
  auto w = create(1);
  add(w, 0, 9);
  auto last = close_ledger(*storage_, 1);
  ASSERT_TRUE(last.is_ok()) << last.status().to_string();
  EXPECT_EQ(*last, 9);
  EXPECT_EQ(add_entry(*storage_, w, 10, Slice::copy_of("x")).code(), ErrorCode::kFenced);
  EXPECT_EQ(open_ledger(*storage_, 1).status().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(*close_ledger(*storage_, 1), 9);  // idempotent
  auto info = storage_->ledger_info(1);
  ASSERT_TRUE(info.is_ok());
  EXPECT_TRUE(info->closed);
  EXPECT_EQ(info->last_confirmed, 9);
  expect_entries(1, 0, 9);
}

TEST_F(StorageImplTest, CloseWithAddsInFlightEndsAtTheLastOneWritten) {
  start();
  auto w = create(1);
  std::vector<std::future<common::Status>> adds;
  for (EntryId e = 0; e < 200; ++e) {
    auto p = std::make_shared<std::promise<common::Status>>();
    adds.push_back(p->get_future());
    storage_->add_entry(w, e, Slice::copy_of(entry_payload(1, e)), [p](common::Status st) { p->set_value(st); });
  }
  auto last = close_ledger(*storage_, 1);
  ASSERT_TRUE(last.is_ok());
  EntryId ok_count = 0;
  for (auto& f : adds) {
    auto st = wait_for(f);
    if (st.is_ok()) ++ok_count;
  }
  EXPECT_EQ(*last, ok_count - 1);
  expect_entries(1, 0, *last);
}

TEST_F(StorageImplTest, EverythingSurvivesARestart) {
  start();
  auto w1 = create(1);
  auto w2 = create(2);
  add(w1, 0, 49);
  add(w2, 0, 9);
  ASSERT_TRUE(close_ledger(*storage_, 2).is_ok());
  restart();
  EXPECT_EQ(*storage_->last_confirmed(1), 49);
  auto info2 = storage_->ledger_info(2);
  ASSERT_TRUE(info2.is_ok());
  EXPECT_TRUE(info2->closed);
  EXPECT_EQ(info2->last_confirmed, 9);
  expect_entries(1, 0, 49);
  expect_entries(2, 0, 9);
  // The open ledger takes a new writer and goes on where it stopped.
  auto w = open_ledger(*storage_, 1);
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  add(*w, 50, 59);
  restart();
  expect_entries(1, 0, 59);
  auto ids = storage_->list_ledgers();
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<LedgerId>{1, 2}));
}

TEST_F(StorageImplTest, RestartRebuildsAnIndexThatLostItsTail) {
  start();
  auto w = create(1);
  add(w, 0, 29);
  storage_->stop();
  storage_.reset();
  // The index is rebuilt from the segments when it is gone altogether.
  std::error_code ec;
  std::filesystem::remove_all(dir_.path() + "/index", ec);
  start();
  EXPECT_EQ(*storage_->last_confirmed(1), 29);
  expect_entries(1, 0, 29);
}

TEST_F(StorageImplTest, ATornTailIsCutAtStartUp) {
  start();
  auto w = create(1);
  add(w, 0, 19);
  storage_->stop();
  storage_.reset();
  // A crash in the middle of a write: half a record at the end.
  auto segs = segments();
  ASSERT_FALSE(segs.empty());
  std::string path = segment_path(dir_.path() + "/segments", segs.back());
  uint8_t header[format::kRecordHeaderSize];
  std::string payload(300, 'z');
  format::encode_record_header(header, format::RecordType::kEntry, 1, 20, payload.data(), 300);
  FILE* f = std::fopen(path.c_str(), "ab");
  std::fwrite(header, 1, sizeof(header), f);
  std::fwrite(payload.data(), 1, 100, f);
  std::fclose(f);
  auto size_before = std::filesystem::file_size(path);
  start();
  EXPECT_EQ(*storage_->last_confirmed(1), 19);
  EXPECT_EQ(std::filesystem::file_size(path), size_before - sizeof(header) - 100);
  auto w2 = open_ledger(*storage_, 1);
  ASSERT_TRUE(w2.is_ok());
  add(*w2, 20, 24);
  restart();
  expect_entries(1, 0, 24);
}

TEST_F(StorageImplTest, ACorruptRecordInTheMiddleIsAnErrorNeverData) {
  start();
  auto w = create(1);
  add(w, 0, 9);
  storage_->stop();
  storage_.reset();
  // Flip one payload byte of entry 5 (records are 25 + 100..163 bytes).
  std::string path = segment_path(dir_.path() + "/segments", segments().front());
  auto scanned = scan_segment(dir_.path() + "/segments", segments().front(), 0, [&](const ScannedRecord& rec) {
    if (rec.header.type == format::RecordType::kEntry && rec.header.entry == 5) {
      FILE* f = std::fopen(path.c_str(), "r+b");
      std::fseek(f, static_cast<long>(rec.offset + format::kRecordHeaderSize + 10), SEEK_SET);
      std::fputc(rec.payload[10] ^ 0x40, f);
      std::fclose(f);
    }
  });
  ASSERT_TRUE(scanned.is_ok());
  start();  // the index checkpoint is past the damage: no rescan
  EXPECT_EQ(*storage_->last_confirmed(1), 9);
  auto head = read_entries(*storage_, 1, 0, 9);
  ASSERT_TRUE(head.is_ok());
  ASSERT_EQ(head->size(), 5u);  // stops before the damaged entry
  EXPECT_EQ(read_entries(*storage_, 1, 5, 9).status().code(), ErrorCode::kCorruption);
  expect_entries(1, 6, 9);
}

// A replay (the index lost its tail, here all of it) meets damage in an
// older segment: every good record is kept, older segments are never cut,
// and only the damaged entries answer kCorruption.
TEST_F(StorageImplTest, AReplayKeepsEveryGoodRecordPastDamage) {
  StorageOptions o = small_options(dir_.path());
  o.segment_size = 8192;
  start(o);
  auto w = create(1);
  add(w, 0, 199);
  storage_->stop();
  storage_.reset();
  auto segs = segments();
  ASSERT_GT(segs.size(), 3u);
  // Overwrite 16 bytes in the middle of the first segment.
  const std::string path = segment_path(dir_.path() + "/segments", segs.front());
  const auto size_before = std::filesystem::file_size(path);
  std::vector<int64_t> damaged;
  auto scanned = scan_segment(dir_.path() + "/segments", segs.front(), 0, [&](const ScannedRecord& rec) {
    const uint64_t at = size_before / 2;
    if (rec.header.type == format::RecordType::kEntry && rec.offset + rec.size > at && rec.offset < at + 16) {
      damaged.push_back(rec.header.entry);
    }
  });
  ASSERT_TRUE(scanned.is_ok());
  ASSERT_FALSE(damaged.empty());
  FILE* f = std::fopen(path.c_str(), "r+b");
  std::fseek(f, static_cast<long>(size_before / 2), SEEK_SET);
  for (int i = 0; i < 16; ++i) std::fputc(0x5a, f);
  std::fclose(f);
  std::error_code ec;
  std::filesystem::remove_all(dir_.path() + "/index", ec);
  start(o);
  EXPECT_EQ(std::filesystem::file_size(path), size_before);  // nothing cut
  EXPECT_EQ(*storage_->last_confirmed(1), 199);
  for (EntryId e = 0; e <= 199; ++e) {
    auto r = read_entries(*storage_, 1, e, e);
    if (std::find(damaged.begin(), damaged.end(), e) != damaged.end()) {
      EXPECT_EQ(r.status().code(), ErrorCode::kCorruption) << "entry " << e;
    } else {
      ASSERT_TRUE(r.is_ok()) << "entry " << e << ": " << r.status().to_string();
      EXPECT_EQ(r->front().data.to_string(), entry_payload(1, e));
    }
  }
  auto& damaged_bytes = common::MetricsRegistry::global().counter("magnetar_storage_damaged_bytes_total", "");
  EXPECT_GT(damaged_bytes.value(), 0u);
}

TEST_F(StorageImplTest, TailReadsComeFromTheCache) {
  start();
  auto& hits = common::MetricsRegistry::global().counter("magnetar_storage_cache_hits_total", "");
  auto& misses = common::MetricsRegistry::global().counter("magnetar_storage_cache_misses_total", "");
  auto w = create(1);
  add(w, 0, 9);
  uint64_t h0 = hits.value(), m0 = misses.value();
  expect_entries(1, 0, 9);
  EXPECT_EQ(hits.value() - h0, 10u);
  EXPECT_EQ(misses.value(), m0);
}

TEST_F(StorageImplTest, CatchUpReadsReadAheadAsFarAsTheyAsked) {
  StorageOptions o = small_options(dir_.path());
  o.tail_cache_bytes = 0;
  o.read_ahead_entries = 50;
  start(o);
  auto& misses = common::MetricsRegistry::global().counter("magnetar_storage_cache_misses_total", "");
  auto w = create(1);
  add(w, 0, 199);
  uint64_t m0 = misses.value();
  expect_entries(1, 0, 9);  // from disk, and 10 more read ahead
  EXPECT_EQ(misses.value() - m0, 10u);
  expect_entries(1, 10, 19);
  EXPECT_EQ(misses.value() - m0, 10u);
  expect_entries(1, 20, 99);  // 80 asked: read ahead stops at 50
  EXPECT_EQ(misses.value() - m0, 90u);
  expect_entries(1, 100, 149);
  EXPECT_EQ(misses.value() - m0, 90u);
  // A one-entry probe (a seek) reads one more, not a whole window.
  expect_entries(1, 170, 170);
  EXPECT_EQ(misses.value() - m0, 91u);
  expect_entries(1, 171, 171);
  EXPECT_EQ(misses.value() - m0, 91u);
  expect_entries(1, 172, 172);
  EXPECT_EQ(misses.value() - m0, 92u);
}

TEST_F(StorageImplTest, ShortReadsFollowTheByteLimit) {
  StorageOptions o = small_options(dir_.path());
  o.max_read_bytes = 1000;
  start(o);
  auto w = create(1);
  add(w, 0, 49);
  auto r = read_entries(*storage_, 1, 0, 49);
  ASSERT_TRUE(r.is_ok());
  EXPECT_GE(r->size(), 1u);
  EXPECT_LT(r->size(), 50u);
  expect_entries(1, 0, 49);
}

TEST_F(StorageImplTest, DeleteReclaimsSegmentsNoLiveLedgerShares) {
  StorageOptions o = small_options(dir_.path());
  o.segment_size = 8192;
  start(o);
  auto w1 = create(1);
  add(w1, 0, 199);  // ledger 1 alone: several segments
  ASSERT_TRUE(close_ledger(*storage_, 1).is_ok());
  auto w2 = create(2);
  add(w2, 0, 199);
  size_t before = segments().size();
  ASSERT_GT(before, 6u);
  ASSERT_TRUE(delete_ledger(*storage_, 1).is_ok());
  EXPECT_EQ(storage_->ledger_info(1).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(read_entries(*storage_, 1, 0, 0).status().code(), ErrorCode::kNotFound);
  // The files go on a background thread, off the journal's path.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (segments().size() >= before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  size_t after = segments().size();
  EXPECT_LT(after, before);
  expect_entries(2, 0, 199);
  restart(o);
  EXPECT_EQ(storage_->ledger_info(1).status().code(), ErrorCode::kNotFound);
  expect_entries(2, 0, 199);
  EXPECT_LE(segments().size(), after);
  // The id may be used again.
  auto again = create(1);
  add(again, 0, 2);
  expect_entries(1, 0, 2);
}

TEST_F(StorageImplTest, CallbacksRunOnTheCallingReactor) {
  start();
  runtime::Reactor reactor(0, "reactor-test");
  reactor.start();
  std::promise<bool> created, added, read;
  reactor.run_sync([&] {
    storage_->create_ledger(1, [&](common::Result<LedgerWriter> w) {
      created.set_value(reactor.is_on_thread() && w.is_ok());
      storage_->add_entry(*w, 0, Slice::copy_of("x"), [&](common::Status st) {
        added.set_value(reactor.is_on_thread() && st.is_ok());
        storage_->read_entries(1, 0, 0, [&](common::Result<std::vector<Entry>> r) {
          read.set_value(reactor.is_on_thread() && r.is_ok() && r->size() == 1);
        });
      });
    });
  });
  auto f1 = created.get_future(), f2 = added.get_future(), f3 = read.get_future();
  EXPECT_TRUE(wait_for(f1));
  EXPECT_TRUE(wait_for(f2));
  EXPECT_TRUE(wait_for(f3));
  reactor.stop();
}

// One reactor too busy to take its acknowledgements (its mailbox is full)
// must not hold back another reactor's: the journal used to wait for room.
TEST_F(StorageImplTest, ABusyReactorDoesNotHoldBackAnotherOnesAcknowledgements) {
  start();
  auto w1 = create(1);
  auto w2 = create(2);
  runtime::Reactor busy(0, "reactor-busy", 2);
  runtime::Reactor free(1, "reactor-free");
  busy.start();
  free.start();
  std::promise<void> gate, started;
  std::promise<bool> busy_added, free_added;
  auto gate_open = gate.get_future().share();
  ASSERT_TRUE(busy.post([&, gate_open]() {
                    storage_->add_entry(w1, 0, Slice::copy_of("x"),
                                        [&](common::Status st) { busy_added.set_value(st.is_ok()); });
                    started.set_value();
                    gate_open.wait();
                  })
                  .is_ok());
  started.get_future().wait();
  while (busy.post([] {}).is_ok()) {
  }
  free.run_sync([&] {
    storage_->add_entry(w2, 0, Slice::copy_of("y"), [&](common::Status st) { free_added.set_value(st.is_ok()); });
  });
  auto f = free_added.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "an add on one reactor waited for another reactor's full mailbox";
  EXPECT_TRUE(f.get());
  gate.set_value();
  auto b = busy_added.get_future();
  ASSERT_EQ(b.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_TRUE(b.get());
  busy.stop();
  free.stop();
}

TEST_F(StorageImplTest, OversizedEntriesAreRefused) {
  start();
  auto w = create(1);
  Slice big = Slice::allocate(format::kMaxPayloadSize + 1);
  EXPECT_EQ(add_entry(*storage_, w, 0, big).code(), ErrorCode::kInvalidArgument);
}

TEST_F(StorageImplTest, LargeEntriesRoundTrip) {
  start();
  auto w = create(1);
  add(w, 0, 4, 200000);
  restart();
  expect_entries(1, 0, 4, 200000);
}

TEST_F(StorageImplTest, CallsBeforeStartAreUnavailable) {
  storage_ = make_local_storage(small_options(dir_.path()));
  EXPECT_EQ(create_ledger(*storage_, 1).status().code(), ErrorCode::kUnavailable);
}

TEST_F(StorageImplTest, IntervalAndNeverModesKeepEverythingOverACleanStop) {
  for (FsyncMode mode : {FsyncMode::kInterval, FsyncMode::kNever}) {
    StorageOptions o = small_options(dir_.path());
    o.fsync_mode = mode;
    o.fsync_interval = std::chrono::milliseconds(1);
    start(o);
    const LedgerId id = mode == FsyncMode::kInterval ? 1 : 2;
    auto w = create(id);
    add(w, 0, 99);
    restart(o);
    expect_entries(id, 0, 99);
    storage_->stop();
    storage_.reset();
  }
}

TEST_F(StorageImplTest, MetricsAreExported) {
  start();
  auto w = create(1);
  add(w, 0, 9);
  expect_entries(1, 0, 9);
  std::string text = common::MetricsRegistry::global().render();
  for (const char* name : {"magnetar_storage_journal_fsync_seconds_bucket", "magnetar_storage_appended_bytes_total",
                           "magnetar_storage_appended_entries_total", "magnetar_storage_cache_hits_total",
                           "magnetar_storage_cache_misses_total"}) {
    EXPECT_NE(text.find(name), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace magnetar::storage
