#include "storage/journal.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "common/logging.h"
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

// The real calls, recording whether a write began while an fdatasync ran;
// each fdatasync first sleeps, so that appends pile up behind it.
class OverlapFileOps : public FileOps {
 public:
  int open(const std::string& path, int flags, mode_t mode) override { return real_->open(path, flags, mode); }
  int close(int fd) override { return real_->close(fd); }
  ssize_t pwritev(int fd, const struct iovec* iov, int count, off_t offset) override {
    ++writes;
    if (in_sync.load()) ++writes_during_sync;
    return real_->pwritev(fd, iov, count, offset);
  }
  ssize_t pread(int fd, void* out, size_t size, off_t offset) override { return real_->pread(fd, out, size, offset); }
  int fdatasync(int fd) override {
    ++(common::thread_name() == "journal" ? journal_syncs : sync_thread_syncs);
    in_sync.store(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    int r = real_->fdatasync(fd);
    in_sync.store(false);
    return r;
  }
  int fsync(int fd) override { return real_->fsync(fd); }
  int ftruncate(int fd, off_t size) override { return real_->ftruncate(fd, size); }
  int fstat(int fd, struct stat* out) override { return real_->fstat(fd, out); }
  int unlink(const std::string& path) override { return real_->unlink(path); }

  std::atomic<bool> in_sync{false};
  std::atomic<int> writes{0};
  std::atomic<int> writes_during_sync{0};
  std::atomic<int> journal_syncs{0};      // run on the journal thread
  std::atomic<int> sync_thread_syncs{0};  // on the sync thread
  int journal_syncs_before_stop = -1;

 private:
  std::shared_ptr<FileOps> real_ = FileOps::posix();
};

// Appends 1 KiB entries for 150 ms; returns how many completed. `overlaps`:
// writes that began during an fdatasync before the journal stopped (a
// stopping journal writes what is left at once).
int append_for_a_while(const StorageOptions& options, OverlapFileOps& ops, int* overlaps) {
  TempDir dir;
  RecordingListener listener;
  auto seg = SegmentAppender::create(dir.path(), 1, ops);
  EXPECT_TRUE(seg.is_ok());
  Journal journal(dir.path(), options, &listener, std::move(seg.value()));
  journal.start();
  auto ledger = std::make_shared<LedgerState>(1);
  std::atomic<int> done{0};
  const std::string payload(1024, 'w');
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(150);
  EntryId e = 0;
  while (std::chrono::steady_clock::now() < until) {
    JournalRequest r;
    r.ledger = ledger;
    r.entry = e++;
    r.payload = Slice::copy_of(payload);
    r.done = [&](Status st) {
      EXPECT_TRUE(st.is_ok());
      ++done;
    };
    EXPECT_TRUE(journal.submit(std::move(r)).is_ok());
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  const auto settle = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (done.load() < static_cast<int>(e) && std::chrono::steady_clock::now() < settle) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  *overlaps = ops.writes_during_sync.load();
  ops.journal_syncs_before_stop = ops.journal_syncs.load();  // stop syncs on the journal thread
  journal.stop();
  EXPECT_EQ(done.load(), static_cast<int>(e));
  return done.load();
}

TEST(JournalTest, AWriteWaitsForTheSyncInFlight) {
  StorageOptions o = journal_options();
  auto ops = std::make_shared<OverlapFileOps>();
  o.file_ops = ops;
  int overlaps = -1;
  ASSERT_GT(append_for_a_while(o, *ops, &overlaps), 100);
  EXPECT_GT(ops->writes.load(), 5);
  // A few KiB queue up behind each 5 ms sync, far below the threshold:
  // nothing is appended while a sync runs.
  EXPECT_EQ(overlaps, 0);
  // With the sync thread idle and so little queued, the journal thread
  // syncs and completes its own batches.
  EXPECT_GT(ops->journal_syncs_before_stop, 5);
}

TEST(JournalTest, EnoughQueuedIsWrittenBesideTheSync) {
  StorageOptions o = journal_options();
  o.sync_exclusive_bytes = 1;  // any queued byte is enough
  auto ops = std::make_shared<OverlapFileOps>();
  o.file_ops = ops;
  int overlaps = -1;
  ASSERT_GT(append_for_a_while(o, *ops, &overlaps), 100);
  EXPECT_GT(overlaps, 0);
  // Enough queued: the sync thread syncs, the journal thread goes on writing.
  EXPECT_EQ(ops->journal_syncs_before_stop, 0);
  EXPECT_GT(ops->sync_thread_syncs.load(), 5);

  // 0: never held back.
  StorageOptions never = journal_options();
  never.sync_exclusive_bytes = 0;
  auto ops2 = std::make_shared<OverlapFileOps>();
  never.file_ops = ops2;
  ASSERT_GT(append_for_a_while(never, *ops2, &overlaps), 100);
  EXPECT_GT(overlaps, 0);
}

}  // namespace
}  // namespace magnetar::storage
