// Journal: the threads that append records to the active segment with
// group commit.
//
// Callers submit requests from any thread into a bounded queue. The journal
// thread ("journal") takes every request that arrived meanwhile (up to
// max_batch_entries / max_batch_bytes; when it was idle it first waits up to
// max_batch_delay for company, none by default) and writes them with one
// pwritev per segment, then hands the written batch to the completing thread
// ("journal-sync") and goes on writing the next one; while that thread's
// fdatasync runs, the next write waits for it (a write beside a sync slows
// the sync down) unless sync_exclusive_bytes are queued. When the completing
// thread holds nothing and less than a quarter of that is queued, the
// journal thread syncs and completes the batch itself instead (two thread
// wake-ups fewer). Each record is made durable as its ledger's fsync mode
// says (its own, Storage::set_fsync, else the node's
// StorageOptions::fsync_mode): when any record of the batches taken
// together is kAlways, the settling thread runs one fdatasync for all of
// them first; kInterval records are synced by the journal thread at most
// their ledger's interval after they were written; kNever records leave it
// to the OS. Then, in batch order, the
// listener sees each batch (index, cache, last confirmed) and the requests
// complete in order, each on its home reactor. A failed write fails the
// whole batch and breaks every ledger in it (its later adds fail). A failed
// fdatasync loses what was written since the last good one (the kernel
// reports the error once): every request written to that segment since then
// fails, the segment takes no more writes, every ledger that wrote to it is
// broken at its last durable entry (its writer closes it there and moves
// on), and the journal goes on in a new segment. A failed index write, or no
// new segment to go on in, fails the journal for good (every later request
// fails); reads are unaffected.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/bytes.h"
#include "common/metrics.h"
#include "common/status.h"
#include "runtime/reactor.h"
#include "storage/file_ops.h"
#include "storage/index.h"
#include "storage/ledger_state.h"
#include "storage/record_format.h"
#include "storage/segment.h"
#include "storage/storage.h"

namespace magnetar::storage {

struct JournalRequest {
  format::RecordType type = format::RecordType::kEntry;
  std::shared_ptr<LedgerState> ledger;
  EntryId entry = kNoEntry;  // kEntry: the entry id; kLedgerClosed: filled in by the journal
  common::Slice payload;
  runtime::Reactor* home = nullptr;  // where `done` runs; null: on the journal thread
  Callback<common::Status> done;
  // A copy of a record that lives at `relocated_from` (segment compaction):
  // written as the same entry record, always synced before the listener
  // sees it, and no part of the ledger's stream (neither its last entry nor
  // its failure state changes, whatever becomes of the copy).
  bool relocation = false;
  EntryLocation relocated_from;
  // Filled in by the journal: when it was queued (common::monotonic_ns()).
  int64_t submitted_ns = 0;
  // Filled in by the journal thread.
  EntryLocation location;
  common::Status status;
};

class JournalListener {
 public:
  virtual ~JournalListener() = default;
  // Journal thread, once per group commit, after the batch is durable per the
  // fsync mode and before any completion runs. Requests whose status is ok
  // are written at their location; `end` is where the segments end now and
  // `durable` how far an fdatasync has covered them (with FsyncMode::kAlways
  // the same as `end` unless a sync failed). An error fails the batch's
  // requests and the journal.
  virtual common::Status on_written(std::vector<JournalRequest>& batch, const Checkpoint& end,
                                    const Checkpoint& durable) = 0;
};

class Journal {
 public:
  // Appends to `active` from start(). `listener` outlives the journal.
  Journal(std::string segments_dir, const StorageOptions& options, JournalListener* listener,
          std::unique_ptr<SegmentAppender> active);
  ~Journal();  // stop()
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  void start();
  // Completes every queued request, syncs, joins the thread. Idempotent.
  void stop();

  // How far an fdatasync has covered the segments.
  Checkpoint durable() const {
    std::lock_guard lock(durable_mu_);
    return durable_;
  }

  // Any thread. On error the request was not queued and `done` is not called:
  // kResourceExhausted when the queue is full, kUnavailable once stopping,
  // the journal's failure once it failed.
  common::Status submit(JournalRequest&& request);

 private:
  struct Piece {
    const uint8_t* external;  // null: in arena_ at `offset`
    size_t offset;
    size_t size;
  };
  struct Completion {
    Callback<common::Status> done;
    common::Status status;
  };
  // Where a request's time went (magnetar_storage_journal_stage_seconds):
  // queued until taken into a batch, the batch's write, its written -> synced
  // (an fdatasync, and waiting for the one before), the listener's index
  // update, and its completion posted -> run on the home reactor.
  struct Stages {
    common::Histogram& queue;
    common::Histogram& write;
    common::Histogram& sync;
    common::Histogram& index;
    common::Histogram& complete;
  };

  // A batch written by the journal thread, waiting for the sync thread.
  struct WrittenBatch {
    std::vector<JournalRequest> requests;
    std::shared_ptr<SegmentAppender> segment;  // to sync; null when nothing was written
    Checkpoint end;
    int64_t written_ns = 0;
    bool sync = false;  // holds a kAlways record: synced before it completes
  };
  // Batches the journal thread may run ahead of the sync thread.
  static constexpr size_t kMaxUnsyncedBatches = 4;
  // How soon completions held for a full mailbox are tried again.
  static constexpr std::chrono::microseconds kHeldRetry{500};

  void run();
  // Waits for requests; false once stopping and drained.
  bool take_batch(std::vector<JournalRequest>* batch);
  void process(std::vector<JournalRequest>& batch);
  common::Status write_pending();
  common::Status roll_segment();
  // The active segment lost writes (a failed sync or a write it could not
  // cut back): waits until every batch written to it has completed (or
  // failed), breaks each ledger that wrote to it at its last durable entry
  // and goes on in a new segment. Fails the journal when it cannot.
  void abandon_segment();
  common::Status sync_segment(SegmentAppender& segment);
  // How the ledger's records are made durable now: its own mode (with its
  // interval) or the node's.
  struct Durability {
    FsyncMode mode;
    std::chrono::milliseconds interval;  // kInterval only
  };
  Durability durability_of(const LedgerState& ledger) const;
  // Syncs the active segment once the first kInterval record written since
  // the last sync has waited its ledger's interval.
  void maybe_interval_sync();
  void fail_journal(const common::Status& st);
  // The sync thread's fdatasync covering `batches` handed batches that
  // needed one returned (or failed); the last wakes a journal thread that
  // waits to write.
  void syncs_settled(size_t batches);
  // Listener, then completions; in batch order, on one thread at a time.
  void finish(std::vector<JournalRequest>& batch, const Checkpoint& end);
  // A sync of the active segment (journal thread) succeeded.
  void synced_active();
  // An fdatasync covered the segments up to `cp` (any thread; never moves back).
  void advance_durable(const Checkpoint& cp);
  void complete(std::vector<JournalRequest>& batch);
  // Posts completions that found their reactor's mailbox full; with `wait`,
  // until all are posted. On the completing thread.
  void deliver_held(bool wait);
  void sync_run();
  // Syncs (when it must) and finishes `batches`, in order: the settling
  // thread's work, on one thread at a time (settling_). `counted`: they were
  // handed to the sync thread and counted in unsynced_batches_.
  void settle(std::deque<WrittenBatch>& batches, bool counted);
  // The journal thread settles `handed` itself when the sync thread holds
  // nothing and little is queued behind it: two thread wake-ups fewer per
  // group commit. False: hand it over.
  bool settle_here(WrittenBatch& handed);
  // The settling thread finished `batches` and gives up settling_.
  void settled(size_t batches);

  const std::string segments_dir_;
  const StorageOptions options_;
  const std::shared_ptr<FileOps> ops_;  // options_.file_ops, or the real calls
  JournalListener* const listener_;

  // Journal thread only (the sync thread holds its own references).
  std::shared_ptr<SegmentAppender> active_;
  std::string arena_;
  std::vector<Piece> pieces_;
  size_t pending_bytes_ = 0;
  bool dirty_ = false;  // written since the last sync
  // Ledgers with records in the active segment.
  std::vector<std::shared_ptr<LedgerState>> segment_ledgers_;

  // When the active segment must be synced for its kInterval records
  // (time_point::max(): none is waiting).
  std::chrono::steady_clock::time_point interval_deadline_ = std::chrono::steady_clock::time_point::max();

  // The settling thread's (settling_): completions waiting for room in a
  // reactor's mailbox, per reactor, in order.
  std::list<std::pair<runtime::Reactor*, std::deque<runtime::Task>>> held_;
  // How far an fdatasync has covered the segments.
  mutable std::mutex durable_mu_;
  Checkpoint durable_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<JournalRequest> queue_;
  size_t queued_bytes_ = 0;
  bool idle_wait_ = false;   // journal sleeps until the first request
  bool batch_wait_ = false;  // journal waits max_batch_delay for more
  bool sync_wait_ = false;   // journal waits for the fdatasync of what it wrote
  size_t unsynced_batches_ = 0;  // handed to the sync thread, their fdatasync not returned yet
  bool stopping_ = false;
  common::Status failure_;  // once set, every submit fails with it
  std::thread thread_;

  std::mutex sync_mu_;
  std::condition_variable sync_cv_;  // both ways: batches in, room out
  std::deque<WrittenBatch> written_;
  uint64_t batches_handed_ = 0;    // to the sync thread or settled on the journal thread, ever
  uint64_t batches_finished_ = 0;  // settled, ever
  // A thread settles batches (the sync thread, or the journal thread its
  // own); that thread owns held_ meanwhile.
  bool settling_ = false;
  bool held_waiting_ = false;  // held_ was not empty when the last settle ended
  bool sync_stopping_ = false;
  std::thread sync_thread_;

  common::Histogram& fsync_seconds_;
  Stages stages_;
  common::Histogram& batch_entries_;
  common::Counter& appended_bytes_;
  common::Counter& appended_entries_;
  common::Counter& errors_;
  common::Counter& abandoned_segments_;
};

}  // namespace magnetar::storage
