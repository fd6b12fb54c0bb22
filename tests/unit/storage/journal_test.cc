#include "storage/journal.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "runtime/reactor.h"
#include "storage_test_util.h"

namespace magnetar::storage {
namespace {

using common::Slice;
using common::Status;
using testing::TempDir;

// Records what the journal reports, in order.
class RecordingListener : public JournalListener {
 public:
  Status on_written(std::vector<JournalRequest>& batch, const Checkpoint& end, const Checkpoint&) override {
    std::lock_guard lock(mu);
    batch_sizes.push_back(batch.size());
    for (auto& r : batch) {
      if (r.status.is_ok() && r.type == format::RecordType::kEntry) {
        locations.push_back(r.location);
        r.ledger->last_confirmed.store(r.entry);
      }
    }
    last_end = end;
    return Status::ok();
  }
  std::mutex mu;
  std::vector<size_t> batch_sizes;
  std::vector<EntryLocation> locations;
  Checkpoint last_end;
};

struct JournalFixture {
  explicit JournalFixture(StorageOptions o) : options(std::move(o)) {
    auto seg = SegmentAppender::create(dir.path(), 1);
    EXPECT_TRUE(seg.is_ok());
    journal = std::make_unique<Journal>(dir.path(), options, &listener, std::move(seg.value()));
  }
  JournalRequest entry(std::shared_ptr<LedgerState> ledger, EntryId id, std::string payload,
                       std::function<void(Status)> done) {
    JournalRequest r;
    r.ledger = std::move(ledger);
    r.entry = id;
    r.payload = Slice::copy_of(payload);
    r.done = std::move(done);
    return r;
  }
  TempDir dir;
  StorageOptions options;
  RecordingListener listener;
  std::unique_ptr<Journal> journal;
};

StorageOptions journal_options() {
  StorageOptions o;
  o.max_batch_delay = std::chrono::microseconds(0);
  return o;
}

TEST(JournalTest, GroupCommitBatchesByCountAndCompletesInOrder) {
  StorageOptions o = journal_options();
  o.max_batch_entries = 10;
  JournalFixture f(o);
  auto ledger = std::make_shared<LedgerState>(1);
  std::mutex mu;
  std::vector<EntryId> completed;
  std::promise<void> all_done;
  // Queued before the thread starts: the journal finds 100 waiting.
  for (EntryId e = 0; e < 100; ++e) {
    ASSERT_TRUE(f.journal
                    ->submit(f.entry(ledger, e, testing::entry_payload(1, e),
                                     [&, e](Status st) {
                                       EXPECT_TRUE(st.is_ok()) << st.to_string();
                                       std::lock_guard lock(mu);
                                       completed.push_back(e);
                                       if (completed.size() == 100) all_done.set_value();
                                     }))
                    .is_ok());
  }
  f.journal->start();
  ASSERT_EQ(all_done.get_future().wait_for(testing::kWait), std::future_status::ready);
  f.journal->stop();
  for (EntryId e = 0; e < 100; ++e) EXPECT_EQ(completed[e], e);
  EXPECT_EQ(f.listener.batch_sizes, std::vector<size_t>(10, 10));
  EXPECT_EQ(ledger->last_confirmed.load(), 99);
  // Every location reads back as its entry.
  auto reader = SegmentReader::open(f.dir.path(), 1);
  ASSERT_TRUE(reader.is_ok());
  for (EntryId e = 0; e < 100; ++e) {
    const auto& loc = f.listener.locations[e];
    auto bytes = (*reader)->read(loc.offset, loc.size);
    ASSERT_TRUE(bytes.is_ok());
    auto payload = decode_entry_record(*bytes, 1, e);
    ASSERT_TRUE(payload.is_ok()) << payload.status().to_string();
    EXPECT_EQ(payload->to_string(), testing::entry_payload(1, e));
  }
}

TEST(JournalTest, BatchesByBytes) {
  StorageOptions o = journal_options();
  o.max_batch_bytes = 1000;
  JournalFixture f(o);
  auto ledger = std::make_shared<LedgerState>(1);
  std::atomic<int> done{0};
  for (EntryId e = 0; e < 20; ++e) {
    ASSERT_TRUE(f.journal->submit(f.entry(ledger, e, std::string(400, 'a'), [&](Status) { ++done; })).is_ok());
  }
  f.journal->start();
  f.journal->stop();  // completes everything queued
  EXPECT_EQ(done.load(), 20);
  EXPECT_EQ(f.listener.batch_sizes, std::vector<size_t>(10, 2));
}

TEST(JournalTest, RollsOverToANewSegmentWhenFull) {
  StorageOptions o = journal_options();
  o.segment_size = 4096;
  JournalFixture f(o);
  auto ledger = std::make_shared<LedgerState>(1);
  for (EntryId e = 0; e < 100; ++e) {
    ASSERT_TRUE(f.journal->submit(f.entry(ledger, e, std::string(200, 'b'), nullptr)).is_ok());
  }
  f.journal->start();
  f.journal->stop();
  auto segments = list_segments(f.dir.path());
  ASSERT_TRUE(segments.is_ok());
  EXPECT_GT(segments->size(), 4u);
  ASSERT_EQ(f.listener.locations.size(), 100u);
  for (const auto& loc : f.listener.locations) EXPECT_LE(loc.offset + loc.size, 4096u);
  EXPECT_EQ(f.listener.last_end.segment, segments->back());
  for (EntryId e = 0; e < 100; ++e) {
    const auto& loc = f.listener.locations[e];
    auto reader = SegmentReader::open(f.dir.path(), loc.segment);
    ASSERT_TRUE(reader.is_ok());
    auto bytes = (*reader)->read(loc.offset, loc.size);
    ASSERT_TRUE(bytes.is_ok());
    EXPECT_TRUE(decode_entry_record(*bytes, 1, e).is_ok());
  }
}

TEST(JournalTest, FullQueueIsResourceExhausted) {
  StorageOptions o = journal_options();
  o.max_queued_entries = 4;
  JournalFixture f(o);
  auto ledger = std::make_shared<LedgerState>(1);
  for (EntryId e = 0; e < 4; ++e) ASSERT_TRUE(f.journal->submit(f.entry(ledger, e, "x", nullptr)).is_ok());
  Status st = f.journal->submit(f.entry(ledger, 4, "x", nullptr));
  EXPECT_EQ(st.code(), common::ErrorCode::kResourceExhausted);
  f.journal->start();
  f.journal->stop();
  EXPECT_EQ(f.journal->submit(f.entry(ledger, 4, "x", nullptr)).code(), common::ErrorCode::kUnavailable);
}

TEST(JournalTest, ABrokenLedgersLaterEntriesFailWithoutBeingWritten) {
  JournalFixture f(journal_options());
  auto ledger = std::make_shared<LedgerState>(1);
  ledger->journal_broken = true;
  std::promise<Status> got;
  ASSERT_TRUE(f.journal->submit(f.entry(ledger, 0, "x", [&](Status st) { got.set_value(st); })).is_ok());
  f.journal->start();
  auto fut = got.get_future();
  ASSERT_EQ(fut.wait_for(testing::kWait), std::future_status::ready);
  EXPECT_EQ(fut.get().code(), common::ErrorCode::kIoError);
  f.journal->stop();
  EXPECT_TRUE(f.listener.locations.empty());
}

TEST(JournalTest, CompletionsRunOnTheirHomeReactor) {
  JournalFixture f(journal_options());
  runtime::Reactor reactor(0, "reactor-test");
  reactor.start();
  auto ledger = std::make_shared<LedgerState>(1);
  std::promise<bool> on_home;
  JournalRequest r = f.entry(ledger, 0, "x", [&](Status) { on_home.set_value(reactor.is_on_thread()); });
  r.home = &reactor;
  ASSERT_TRUE(f.journal->submit(std::move(r)).is_ok());
  f.journal->start();
  auto fut = on_home.get_future();
  ASSERT_EQ(fut.wait_for(testing::kWait), std::future_status::ready);
  EXPECT_TRUE(fut.get());
  f.journal->stop();
  reactor.stop();
}

TEST(JournalTest, IntervalAndNeverModesComplete) {
  for (FsyncMode mode : {FsyncMode::kInterval, FsyncMode::kNever}) {
    StorageOptions o = journal_options();
    o.fsync_mode = mode;
    o.fsync_interval = std::chrono::milliseconds(1);
    JournalFixture f(o);
    f.journal->start();
    auto ledger = std::make_shared<LedgerState>(1);
    std::atomic<int> done{0};
    for (EntryId e = 0; e < 50; ++e) {
      ASSERT_TRUE(f.journal->submit(f.entry(ledger, e, "y", [&](Status st) {
                    EXPECT_TRUE(st.is_ok());
                    ++done;
                  })).is_ok());
    }
    f.journal->stop();
    EXPECT_EQ(done.load(), 50);
  }
}

}  // namespace
}  // namespace magnetar::storage
