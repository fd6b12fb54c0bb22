// Journal: the threads that append records to the active segment with
// group commit.
//
// Callers submit requests from any thread into a bounded queue. The journal
// thread ("journal") takes every request that arrived meanwhile (up to
// max_batch_entries / max_batch_bytes; when it was idle it first waits up to
// max_batch_delay for company) and writes them with one pwritev per segment.
// With FsyncMode::kAlways it hands the written batch to the sync thread
// ("journal-sync") and goes on writing the next one; the sync thread runs one
// fdatasync for every batch written meanwhile, so writing and syncing
// overlap. Then, in batch order, the listener sees each batch (index, cache,
// last confirmed) and the requests complete in order, each on its home
// reactor. In the other modes the journal thread does that itself after the
// write. A failed write fails the whole batch and breaks every ledger in it
// (its later adds fail); a failed sync or index write fails the journal for
// good (every later request fails); reads are unaffected.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/bytes.h"
#include "common/metrics.h"
#include "common/status.h"
#include "runtime/reactor.h"
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
  // Filled in by the journal thread.
  EntryLocation location;
  common::Status status;
};

class JournalListener {
 public:
  virtual ~JournalListener() = default;
  // Journal thread, once per group commit, after the batch is durable per the
  // fsync mode and before any completion runs. Requests whose status is ok
  // are on disk at their location; `end` is where the segments end now. An
  // error fails the batch's requests and the journal.
  virtual common::Status on_written(std::vector<JournalRequest>& batch, const Checkpoint& end) = 0;
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

  // A batch written by the journal thread, waiting for the sync thread.
  struct WrittenBatch {
    std::vector<JournalRequest> requests;
    std::shared_ptr<SegmentAppender> segment;  // to sync; null when nothing was written
    Checkpoint end;
  };
  // Batches the journal thread may run ahead of the sync thread.
  static constexpr size_t kMaxUnsyncedBatches = 4;

  void run();
  // Waits for requests; false once stopping and drained.
  bool take_batch(std::vector<JournalRequest>* batch);
  void process(std::vector<JournalRequest>& batch);
  common::Status write_pending();
  common::Status roll_segment();
  common::Status sync_segment(SegmentAppender& segment);
  void maybe_interval_sync();
  void fail_journal(const common::Status& st);
  // Listener, then completions; in batch order, on one thread at a time.
  void finish(std::vector<JournalRequest>& batch, const Checkpoint& end);
  void complete(std::vector<JournalRequest>& batch);
  void sync_run();

  const std::string segments_dir_;
  const StorageOptions options_;
  JournalListener* const listener_;

  // Journal thread only (the sync thread holds its own references).
  std::shared_ptr<SegmentAppender> active_;
  std::string arena_;
  std::vector<Piece> pieces_;
  size_t pending_bytes_ = 0;
  bool dirty_ = false;  // written since the last sync
  std::chrono::steady_clock::time_point next_interval_sync_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<JournalRequest> queue_;
  size_t queued_bytes_ = 0;
  bool idle_wait_ = false;   // journal sleeps until the first request
  bool batch_wait_ = false;  // journal waits max_batch_delay for more
  bool stopping_ = false;
  common::Status failure_;  // once set, every submit fails with it
  std::thread thread_;

  std::mutex sync_mu_;
  std::condition_variable sync_cv_;  // both ways: batches in, room out
  std::deque<WrittenBatch> written_;
  bool sync_stopping_ = false;
  std::thread sync_thread_;  // only with FsyncMode::kAlways

  common::Histogram& fsync_seconds_;
  common::Histogram& batch_entries_;
  common::Counter& appended_bytes_;
  common::Counter& appended_entries_;
  common::Counter& errors_;
};

}  // namespace magnetar::storage
