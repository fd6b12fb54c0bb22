// Segment compaction (storage/compaction.cc): a long-lived ledger with a
// few records in every segment no longer pins them once the ledgers around
// it are deleted; its entries read back the same, during and after, across
// restarts, power losses and deletes made while its records are copied.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/metrics.h"
#include "storage/segment.h"
#include "storage/storage.h"
#include "faulty_storage_test.h"

namespace magnetar::storage {
namespace {

using common::ErrorCode;
using common::Slice;
using common::Status;
using namespace testing;  // NOLINT: the test helpers

constexpr uint64_t kSegmentSize = 16384;
constexpr EntryId kChurnPerSegment = 14;  // ~1 KiB each: with one small entry of ledger 1, one segment
constexpr size_t kChurnSize = 1000;
// Segments left once compaction is done: the active one, and one sealed
// segment full of copies at most.
constexpr size_t kCompactedSegments = 3;

uint64_t counter(const char* name) { return common::MetricsRegistry::global().counter(name, "").value(); }

class CompactionTest : public FaultyStorageTest {
 protected:
  StorageOptions options(FsyncMode mode = FsyncMode::kAlways) {
    StorageOptions o = FaultyStorageTest::options(mode);
    o.segment_size = kSegmentSize;
    return o;
  }
  void add(const LedgerWriter& w, EntryId e, size_t size = 100) {
    auto st = add_entry(*storage_, w, e, Slice::copy_of(entry_payload(w.ledger, e, size)));
    ASSERT_TRUE(st.is_ok()) << st.to_string();
  }
  // Adds first..last without waiting between them (one group commit or a few).
  void add_many(const LedgerWriter& w, EntryId first, EntryId last, size_t size) {
    std::mutex mu;
    std::condition_variable cv;
    size_t left = static_cast<size_t>(last - first + 1);
    std::vector<Status> failed;
    for (EntryId e = first; e <= last; ++e) {
      storage_->add_entry(w, e, Slice::copy_of(entry_payload(w.ledger, e, size)), [&](Status st) {
        std::lock_guard lock(mu);
        if (!st.is_ok()) failed.push_back(st);
        --left;
        cv.notify_all();
      });
    }
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, kWait, [&] { return left == 0; }));
    ASSERT_TRUE(failed.empty()) << failed.front().to_string();
  }
  // Ledger 1 (and ledger 3 when asked) gets entry i in segment i, ledger 2
  // fills the rest of each segment; then ledger 2 is deleted unless asked
  // not to, which leaves every segment but the active one almost all dead.
  void fill(EntryId segments, bool third, bool delete_churn = true) {
    auto w1 = create(1);
    auto w2 = create(2);
    LedgerWriter w3 = third ? create(3) : LedgerWriter{};
    for (EntryId i = 0; i < segments; ++i) {
      add(w1, i);
      if (third) add(w3, i);
      add_many(w2, i * kChurnPerSegment, (i + 1) * kChurnPerSegment - 1, kChurnSize);
    }
    ASSERT_GE(segment_files().size(), static_cast<size_t>(segments * 3 / 4));
    if (delete_churn) {
      ASSERT_TRUE(delete_ledger(*storage_, 2).is_ok());
    }
  }
  void expect_entries(LedgerId id, EntryId count) { FaultyStorageTest::expect_entries(id, 0, count - 1); }
  std::vector<uint64_t> segment_files() { return list_segments(dir_path_ + "/segments").value_or({}); }
  // Waits (bounded) until `done` holds; false when it never did.
  static bool eventually(const std::function<bool()>& done) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }
  bool compacted() {
    return eventually([&] { return segment_files().size() <= kCompactedSegments; });
  }
};

TEST_F(CompactionTest, ALongLivedLedgerNoLongerPinsEverySegment) {
  constexpr EntryId kSegments = 40;
  const uint64_t segments_before = counter("magnetar_storage_compacted_segments_total");
  const uint64_t bytes_before = counter("magnetar_storage_compacted_bytes_total");
  start(options());
  fill(kSegments, false);
  EXPECT_TRUE(compacted()) << segment_files().size() << " segments left";
  expect_entries(1, kSegments);
  EXPECT_EQ(read_entries(*storage_, 2, 0, 0).status().code(), ErrorCode::kNotFound);
  EXPECT_GE(counter("magnetar_storage_compacted_segments_total") - segments_before,
            static_cast<uint64_t>(kSegments * 3 / 4 - 2));
  EXPECT_GE(counter("magnetar_storage_compacted_bytes_total") - bytes_before,
            static_cast<uint64_t>(kSegments * (format::kRecordHeaderSize + 100)));
  std::string text = common::MetricsRegistry::global().render();
  EXPECT_NE(text.find("magnetar_storage_dead_bytes"), std::string::npos);

  // The copies are what the index holds now, across a restart too; the
  // ledger is still open and goes on where it was.
  stop();
  start(options());
  EXPECT_LE(segment_files().size(), kCompactedSegments);
  expect_entries(1, kSegments);
  auto w = open_ledger(*storage_, 1);
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  EXPECT_EQ(*storage_->last_confirmed(1), kSegments - 1);
  add(*w, kSegments);
  expect_entries(1, kSegments + 1);
}

TEST_F(CompactionTest, NothingIsCompactedWithARatioOfZero) {
  constexpr EntryId kSegments = 12;
  StorageOptions o = options();
  o.compact_ratio = 0;
  start(o);
  fill(kSegments, false);
  // Another delete-and-roll would start a compaction if one were allowed.
  stop();
  start(o);
  EXPECT_GE(segment_files().size(), static_cast<size_t>(kSegments * 3 / 4));
  expect_entries(1, kSegments);
}

TEST_F(CompactionTest, ReadsDuringCompactionReturnTheSameBytes) {
  constexpr EntryId kSegments = 40;
  StorageOptions o = options();
  o.tail_cache_bytes = 0;  // every read goes to the disk
  o.read_ahead_cache_bytes = 0;
  o.read_ahead_entries = 0;
  start(o);
  fill(kSegments, false, false);
  ops_->delay_syncs(std::chrono::milliseconds(2));  // compaction takes a while: readers overlap it
  std::atomic<bool> done{false};
  std::atomic<int> reads{0};
  std::atomic<int> bad{0};
  std::string first_error;
  // One entry at a time, and all of them at once (one lookup, then a read
  // of each segment in turn while compaction removes them).
  std::thread reader([&] {
    while (!done) {
      for (EntryId e = 0; e < kSegments && !done; ++e) {
        auto got = read_entries(*storage_, 1, e, e);
        if (!got.is_ok() || got->size() != 1 || (*got)[0].data.to_string() != entry_payload(1, e)) {
          if (bad++ == 0) first_error = got.is_ok() ? "wrong bytes at " + std::to_string(e) : got.status().to_string();
        }
        ++reads;
      }
      auto all = read_all(*storage_, 1, 0, kSegments - 1);
      bool same = all.is_ok() && all->size() == static_cast<size_t>(kSegments);
      for (EntryId e = 0; same && e < kSegments; ++e) same = (*all)[e].data.to_string() == entry_payload(1, e);
      if (!same && bad++ == 0) first_error = all.is_ok() ? "wrong bytes in a range read" : all.status().to_string();
      ++reads;
    }
  });
  ASSERT_TRUE(delete_ledger(*storage_, 2).is_ok());
  const bool finished = compacted();
  done = true;
  reader.join();
  ops_->clear_faults();
  EXPECT_TRUE(finished) << segment_files().size() << " segments left";
  EXPECT_EQ(bad.load(), 0) << first_error;
  EXPECT_GT(reads.load(), kSegments);
  expect_entries(1, kSegments);
}

// A ledger deleted while its records are being copied: the copies never
// bring it back, before or after a restart, and do not pin segments.
TEST_F(CompactionTest, ALedgerDeletedMidCompactionStaysDeleted) {
  constexpr EntryId kSegments = 40;
  start(options());
  fill(kSegments, true);
  ops_->delay_syncs(std::chrono::milliseconds(5));
  const uint64_t bytes_before = counter("magnetar_storage_compacted_bytes_total");
  // The fill's delete started compaction: wait for its first copies.
  ASSERT_TRUE(eventually([&] { return counter("magnetar_storage_compacted_bytes_total") > bytes_before; }));
  const uint64_t segments_at_delete = counter("magnetar_storage_compacted_segments_total");
  ASSERT_TRUE(delete_ledger(*storage_, 3).is_ok());
  ops_->clear_faults();
  EXPECT_TRUE(compacted()) << segment_files().size() << " segments left";
  // It was deleted mid-compaction: segments were compacted after.
  EXPECT_GT(counter("magnetar_storage_compacted_segments_total"), segments_at_delete + 1);
  EXPECT_EQ(storage_->ledger_info(3).status().code(), ErrorCode::kNotFound);
  expect_entries(1, kSegments);
  stop();
  start(options());
  EXPECT_EQ(storage_->ledger_info(3).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(storage_->list_ledgers(), std::vector<LedgerId>{1});
  EXPECT_LE(segment_files().size(), kCompactedSegments);
  expect_entries(1, kSegments);
}

// The power goes at each fdatasync of a compaction in turn (the node never
// syncs its own adds, so these are the copies' syncs and the rollovers').
// Every entry that was durable before is there after, and compaction
// finishes on the next start.
TEST_F(CompactionTest, APowerLossAtAnyPointOfACompactionLosesNothing) {
  constexpr EntryId kSegments = 10;
  bool finished_before_crash = false;
  for (int crash_at = 1; !finished_before_crash && crash_at <= 40; ++crash_at) {
    SCOPED_TRACE("power loss at sync " + std::to_string(crash_at));
    dir_path_ = dir_.path() + "/" + std::to_string(crash_at);
    ops_ = std::make_shared<FaultyFileOps>();
    StorageOptions o = options(FsyncMode::kNever);
    start(o);
    fill(kSegments, false, false);
    // Everything written so far is durable: a reopen syncs what it recovered.
    stop();
    start(o);
    ops_->crash_at_sync(crash_at);
    auto deleted = delete_ledger(*storage_, 2);
    ASSERT_TRUE(deleted.is_ok()) << deleted.to_string();
    // Until the power goes, or compaction is done without it going.
    ASSERT_TRUE(eventually([&] { return ops_->crashed() || segment_files().size() <= kCompactedSegments; }));
    if (!ops_->crashed()) {
      finished_before_crash = true;
      ops_->crash();
    }
    stop();
    ops_->clear_faults();
    start(o);
    expect_entries(1, kSegments);
    // Ledger 2's delete was never synced (kNever) and may be gone with the
    // power; when it survived, compaction goes on and finishes.
    if (storage_->ledger_info(2).is_ok()) {
      ASSERT_TRUE(delete_ledger(*storage_, 2).is_ok());
    }
    EXPECT_TRUE(compacted()) << segment_files().size() << " segments left";
    expect_entries(1, kSegments);
    stop();
  }
  EXPECT_TRUE(finished_before_crash) << "every sync point was tried";
}

// The index loses what it learnt while a compaction ran (a power loss
// takes LevelDB's unsynced tail) while the old segments are still there:
// recovery finds the copies past its checkpoint and takes them as the newer
// location of their entries, and the old segments then go.
TEST_F(CompactionTest, RecoveryTakesCopiesPastTheCheckpointAsTheirEntriesNewLocation) {
  constexpr EntryId kSegments = 20;
  StorageOptions off = options();
  off.compact_ratio = 0;
  start(off);
  fill(kSegments, true);
  stop();
  const std::string index = dir_path_ + "/index";
  const std::string saved = dir_path_ + "/index-before";
  std::filesystem::copy(index, saved);

  const uint64_t segments_before = counter("magnetar_storage_compacted_segments_total");
  const uint64_t sealed = segment_files().size() - 1;
  ops_->fail_unlinks(EIO);  // the compacted segments stay on disk
  start(options());
  ASSERT_TRUE(eventually([&] {
    return counter("magnetar_storage_compacted_segments_total") - segments_before >= sealed;
  }));
  ASSERT_TRUE(delete_ledger(*storage_, 3).is_ok());  // after its copies, in the log
  stop();
  ops_->clear_faults();
  ASSERT_GE(segment_files().size(), static_cast<size_t>(kSegments * 3 / 4));
  std::filesystem::remove_all(index);
  std::filesystem::rename(saved, index);

  // Without compaction: what removes the old segments here is the replay.
  start(off);
  expect_entries(1, kSegments);
  EXPECT_EQ(storage_->ledger_info(3).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(storage_->list_ledgers(), std::vector<LedgerId>{1});
  // Nothing points into the old segments any more: they go at start-up.
  EXPECT_LE(segment_files().size(), kCompactedSegments);
  stop();
  start(off);
  expect_entries(1, kSegments);
  EXPECT_LE(segment_files().size(), kCompactedSegments);
}

}  // namespace
}  // namespace magnetar::storage
