// The real journal, recovery and read path through injected disk faults:
// failed and slow fdatasyncs, write errors, a full disk, short writes and
// power losses (utils/faulty_file_ops.h).
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "common/metrics.h"
#include "storage/storage_impl.h"
#include "faulty_storage_test.h"

namespace magnetar::storage {
namespace {

using common::ErrorCode;
using common::Slice;
using common::Status;
using namespace testing;  // NOLINT: the test helpers

class StorageFaultTest : public FaultyStorageTest {
 protected:
  void add(const LedgerWriter& w, EntryId from, EntryId to) {
    for (EntryId e = from; e <= to; ++e) {
      auto st = add_entry(*storage_, w, e, Slice::copy_of(entry_payload(w.ledger, e)));
      ASSERT_TRUE(st.is_ok()) << st.to_string();
    }
  }
  // Adds first..last without waiting between them; the status of each.
  std::vector<Status> add_async(const LedgerWriter& w, EntryId first, EntryId last) {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<Status> out(static_cast<size_t>(last - first + 1), Status::internal("no answer"));
    size_t left = out.size();
    for (EntryId e = first; e <= last; ++e) {
      storage_->add_entry(w, e, Slice::copy_of(entry_payload(w.ledger, e)), [&, e](Status st) {
        std::lock_guard lock(mu);
        out[static_cast<size_t>(e - first)] = std::move(st);
        --left;
        cv.notify_all();
      });
    }
    std::unique_lock lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, kWait, [&] { return left == 0; }));
    return out;
  }
};

// The kernel reports a writeback error to one fdatasync only. Adds written
// while that sync ran must not be acknowledged by the next one, which
// succeeds over pages that never reached the disk.
TEST_F(StorageFaultTest, AFailedSyncFailsEveryAddItCouldHaveLost) {
  start(options());
  auto w = create(1);
  add(w, 0, 9);
  ops_->delay_syncs(std::chrono::milliseconds(20));  // adds pile up behind the failing sync
  ops_->fail_syncs(EIO, 1);
  auto statuses = add_async(w, 10, 409);
  ops_->clear_faults();
  ASSERT_EQ(ops_->syncs_failed(), 1);
  // Acknowledged adds are a prefix: the ledger never has a hole.
  EntryId last_ok = 9;
  while (last_ok + 1 <= 409 && statuses[static_cast<size_t>(last_ok + 1 - 10)].is_ok()) ++last_ok;
  for (EntryId e = last_ok + 1; e <= 409; ++e) {
    EXPECT_FALSE(statuses[static_cast<size_t>(e - 10)].is_ok()) << "entry " << e << " acknowledged after a failure";
  }
  EXPECT_LT(last_ok, 409);
  // The broken ledger takes no more adds, and seals at its last durable entry.
  EXPECT_FALSE(add_entry(*storage_, w, last_ok + 1, Slice::copy_of(entry_payload(1, last_ok + 1))).is_ok());
  auto closed = close_ledger(*storage_, 1);
  ASSERT_TRUE(closed.is_ok()) << closed.status().to_string();
  EXPECT_EQ(*closed, last_ok);
  // The journal goes on in a new segment: other ledgers still write.
  auto w2 = create(2);
  add(w2, 0, 49);
  stop();
  ops_->power_loss();
  start(options());
  EXPECT_EQ(*storage_->last_confirmed(1), last_ok);
  expect_entries(1, 0, last_ok);
  expect_entries(2, 0, 49);
}

TEST_F(StorageFaultTest, AFailedSyncIsCountedAndTheSegmentAbandoned) {
  auto& abandoned = common::MetricsRegistry::global().counter("magnetar_storage_abandoned_segments_total", "");
  const uint64_t before = abandoned.value();
  start(options());
  auto w = create(1);
  add(w, 0, 4);
  ops_->fail_syncs(EIO, 1);
  EXPECT_FALSE(add_entry(*storage_, w, 5, Slice::copy_of(entry_payload(1, 5))).is_ok());
  auto w2 = create(2);  // written after the abandonment
  add(w2, 0, 4);
  EXPECT_EQ(abandoned.value(), before + 1);
  EXPECT_GE(list_segments(dir_.path() + "/segments")->size(), 2u);
  expect_entries(1, 0, 4);
}

TEST_F(StorageFaultTest, AWriteErrorFailsTheLedgerAndOthersGoOn) {
  for (int err : {EIO, ENOSPC}) {
    start(options());
    const LedgerId id = err == EIO ? 1 : 3;
    auto w = create(id);
    add(w, 0, 9);
    ops_->fail_writes(err, 1);
    auto st = add_entry(*storage_, w, 10, Slice::copy_of(entry_payload(id, 10)));
    EXPECT_EQ(st.code(), ErrorCode::kIoError) << st.to_string();
    EXPECT_NE(st.message().find(std::strerror(err)), std::string::npos) << st.to_string();
    // Its later adds fail without a hole; a new ledger writes.
    EXPECT_FALSE(add_entry(*storage_, w, 10, Slice::copy_of(entry_payload(id, 10))).is_ok());
    auto w2 = create(id + 1);
    add(w2, 0, 9);
    auto closed = close_ledger(*storage_, id);
    ASSERT_TRUE(closed.is_ok());
    EXPECT_EQ(*closed, 9);
    stop();
    start(options());
    expect_entries(id, 0, 9);
    expect_entries(id + 1, 0, 9);
    stop();
  }
}

TEST_F(StorageFaultTest, ShortWritesAreCompleted) {
  ops_->short_writes(7);
  start(options());
  auto w = create(1);
  add(w, 0, 99);
  ops_->clear_faults();
  stop();
  ops_->power_loss();
  start(options());
  expect_entries(1, 0, 99);
}

TEST_F(StorageFaultTest, APowerLossKeepsEveryAcknowledgedAdd) {
  StorageOptions o = options();
  o.segment_size = 16384;  // several rollovers
  start(o);
  auto w1 = create(1);
  auto w2 = create(2);
  auto s1 = add_async(w1, 0, 299);
  auto s2 = add_async(w2, 0, 299);
  for (const auto& st : s1) ASSERT_TRUE(st.is_ok()) << st.to_string();
  for (const auto& st : s2) ASSERT_TRUE(st.is_ok()) << st.to_string();
  // The power goes before a clean stop could sync anything more.
  ops_->crash();
  stop();
  ops_->clear_faults();
  start(o);
  expect_entries(1, 0, 299);
  expect_entries(2, 0, 299);
}

// With fsync on an interval, acknowledged adds since the last sync may be
// lost to a power loss; what is left must be a shorter ledger that reads
// back whole, not an index that points past the end of the data.
TEST_F(StorageFaultTest, APowerLossInIntervalModeLeavesAShorterLedger) {
  StorageOptions o = options(FsyncMode::kInterval);
  o.fsync_interval = std::chrono::hours(1);  // nothing is synced after the creation
  start(o);
  auto w = create(1);
  add(w, 0, 199);
  EXPECT_EQ(*storage_->last_confirmed(1), 199);
  // The index (not behind the seam) keeps what it was told; the unsynced
  // segment bytes are gone.
  ops_->crash();
  stop();
  ops_->clear_faults();
  start(o);
  auto last = storage_->last_confirmed(1);
  ASSERT_TRUE(last.is_ok()) << last.status().to_string();
  EXPECT_LT(*last, 199);
  if (*last >= 0) expect_entries(1, 0, *last);
  // The ledger goes on from where the data ends.
  auto again = open_ledger(*storage_, 1);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  add(*again, *last + 1, *last + 10);
  expect_entries(1, 0, *last + 10);
}

// A ledger's own fsync mode (a namespace's persistence policy) decides
// when its adds are acknowledged, whatever the node's mode: on a node that
// never syncs, a kAlways ledger's acknowledged adds survive a power loss.
TEST_F(StorageFaultTest, ALedgersOwnFsyncModeOutlivesAPowerLossOnANodeThatNeverSyncs) {
  StorageOptions o = options(FsyncMode::kNever);
  start(o);
  auto durable = create(1);
  auto fast = create(2);
  ASSERT_TRUE(storage_->set_fsync(1, FsyncMode::kAlways, std::chrono::milliseconds(0)).is_ok());
  EXPECT_EQ(storage_->set_fsync(99, FsyncMode::kAlways, {}).code(), ErrorCode::kNotFound);
  const int before = ops_->syncs();
  add(durable, 0, 99);
  EXPECT_GE(ops_->syncs() - before, 1);
  add(fast, 0, 99);  // acknowledged after write: nothing syncs them
  ops_->crash();
  stop();
  ops_->clear_faults();
  start(o);
  EXPECT_EQ(*storage_->last_confirmed(1), 99);
  expect_entries(1, 0, 99);
  auto lost = storage_->last_confirmed(2);
  EXPECT_TRUE(!lost.is_ok() || *lost < 99) << "a kNever ledger's unsynced adds survived a power loss";
}

// The other way: on a node that syncs every commit, a kNever ledger's adds
// wait for no fdatasync, and setting the node's mode back (nullopt) syncs again.
TEST_F(StorageFaultTest, AKNeverLedgerOnASyncingNodeRunsNoFdatasync) {
  start(options(FsyncMode::kAlways));
  auto w = create(1);
  ASSERT_TRUE(storage_->set_fsync(1, FsyncMode::kNever, {}).is_ok());
  const int before = ops_->syncs();
  add(w, 0, 199);
  EXPECT_EQ(ops_->syncs(), before);
  ASSERT_TRUE(storage_->set_fsync(1, std::nullopt, {}).is_ok());
  add(w, 200, 209);
  EXPECT_GE(ops_->syncs() - before, 1);
  expect_entries(1, 0, 209);
}

// kInterval on a ledger of a node that never syncs: its adds are
// acknowledged at once and an fdatasync follows within the interval.
TEST_F(StorageFaultTest, AKIntervalLedgerIsSyncedWithinItsInterval) {
  start(options(FsyncMode::kNever));
  auto w = create(1);
  ASSERT_TRUE(storage_->set_fsync(1, FsyncMode::kInterval, std::chrono::milliseconds(20)).is_ok());
  const int before = ops_->syncs();
  add(w, 0, 9);
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (ops_->syncs() == before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GT(ops_->syncs(), before) << "no fdatasync followed the interval ledger's adds";
  // Once synced, nothing more is due: the journal does not sync while idle.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const int settled = ops_->syncs();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(ops_->syncs(), settled);
}

}  // namespace
}  // namespace magnetar::storage
