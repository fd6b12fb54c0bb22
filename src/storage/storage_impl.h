// StorageImpl: Storage on local disk (segments + LevelDB index + caches).
//
// Rooms: storage_impl.cc (ledger lifecycle and adds), recovery.cc (start-up:
// index rebuild from the segments' tail, torn tail cut), read_path.cc (reads,
// read-ahead), compaction.cc (copying the live records out of mostly dead
// segments), and on_written (journal thread: index, cache, garbage
// collection of segments whose ledgers are all deleted).
//
// Threads: the ledger table is guarded by table_mu_; each LedgerState by its
// own mutex. The journal thread does the index writes and changes usage_
// (under usage_mu_, which the compacting thread reads); the "storage-read"
// threads do disk reads; "storage-compact" reads segments to compact.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/metrics.h"
#include "runtime/worker_thread.h"
#include "storage/entry_cache.h"
#include "storage/file_ops.h"
#include "storage/index.h"
#include "storage/journal.h"
#include "storage/ledger_state.h"
#include "storage/segment.h"
#include "storage/storage.h"

namespace magnetar::storage {

class StorageImpl final : public Storage, private JournalListener {
 public:
  explicit StorageImpl(StorageOptions options);
  ~StorageImpl() override;

  std::string_view name() const override { return "storage"; }
  common::Status start() override;
  void stop() override;

  void create_ledger(LedgerId id, Callback<common::Result<LedgerWriter>> done) override;
  void open_ledger(LedgerId id, Callback<common::Result<LedgerWriter>> done) override;
  void add_entry(const LedgerWriter& writer, EntryId entry, common::Slice data,
                 Callback<common::Status> done) override;
  common::Status set_fsync(LedgerId id, std::optional<FsyncMode> mode, std::chrono::milliseconds interval) override;
  void close_ledger(LedgerId id, Callback<common::Result<EntryId>> done) override;
  void read_entries(LedgerId id, EntryId first, EntryId last,
                    Callback<common::Result<std::vector<Entry>>> done) override;
  void delete_ledger(LedgerId id, Callback<common::Status> done) override;
  common::Result<LedgerInfo> ledger_info(LedgerId id) const override;
  std::vector<LedgerId> list_ledgers() const override;

 private:
  // Fills in the real file system calls when the options name none.
  static StorageOptions with_file_ops(StorageOptions options);
  // recovery.cc
  common::Status recover();
  common::Status replay_segment(uint64_t segment, uint64_t start, bool is_last, uint64_t* valid_end);
  common::Status load_ledgers();

  // read_path.cc
  void read_from_disk(std::shared_ptr<LedgerState> ledger, EntryId first, EntryId last,
                      std::vector<Entry> entries, size_t bytes, runtime::Reactor* home,
                      Callback<common::Result<std::vector<Entry>>> done);
  common::Result<std::shared_ptr<SegmentReader>> segment_reader(uint64_t segment);

  // JournalListener, journal thread.
  common::Status on_written(std::vector<JournalRequest>& batch, const Checkpoint& end,
                            const Checkpoint& durable) override;
  common::Status collect_garbage(uint64_t active_segment);

  // What the index points at in one segment.
  struct SegmentUsage {
    uint64_t live = 0;                                // bytes of those records, headers included
    std::unordered_map<LedgerId, uint64_t> ledgers;  // ledger -> its share of `live`
  };
  // REQUIRES: usage_mu_ held. remove_usage returns true when the segment
  // holds nothing live any more.
  void add_usage(uint64_t segment, LedgerId ledger, uint64_t bytes);
  bool remove_usage(uint64_t segment, LedgerId ledger, uint64_t bytes);

  // compaction.cc
  struct CompactionJob;
  // Any thread: starts compacting the oldest sealed segment whose live
  // bytes are under the ratio, unless a compaction runs or none qualifies.
  void maybe_compact();
  // The compacting thread: copies the next stretch of the job's segment.
  void compact_step(std::shared_ptr<CompactionJob> job);
  void end_compaction(const CompactionJob& job, bool finished);
  // Journal thread: points the index at copies that are durable now and
  // moves their bytes in usage_. True when a segment lost its last live record.
  common::Result<bool> commit_relocations(const std::vector<const JournalRequest*>& copies,
                                          const Checkpoint& durable);

  std::shared_ptr<LedgerState> find(LedgerId id) const;
  // Runs `fn` on `home` (or here when null), never inline in the API call
  // when home is a reactor.
  static void deliver(runtime::Reactor* home, runtime::Task fn);

  const StorageOptions options_;
  const std::shared_ptr<FileOps> ops_;
  const std::string segments_dir_;
  const std::string index_dir_;
  std::unique_ptr<Index> index_;
  std::unique_ptr<Journal> journal_;
  std::vector<std::unique_ptr<runtime::WorkerThread>> read_threads_;  // ledger id reads on [id % size]
  std::unique_ptr<runtime::WorkerThread> remover_;  // unlinks dead segments off the journal's path
  std::unique_ptr<runtime::WorkerThread> compactor_;  // reads segments to compact ("storage-compact")
  EntryCache tail_cache_;
  EntryCache read_ahead_cache_;
  std::atomic<bool> started_{false};  // API calls check it; start/stop run with no call in flight

  mutable std::mutex table_mu_;
  std::unordered_map<LedgerId, std::shared_ptr<LedgerState>> ledgers_;
  uint64_t next_writer_token_ = 1;  // under table_mu_

  std::mutex readers_mu_;
  std::map<uint64_t, std::shared_ptr<SegmentReader>> readers_;

  // Written by the journal thread (and start-up before it runs), read by
  // the compacting thread.
  mutable std::mutex usage_mu_;
  std::map<uint64_t, SegmentUsage> usage_;  // segments the index points into
  uint64_t active_segment_ = 0;
  std::map<uint64_t, uint64_t> sealed_sizes_;  // segment -> file size, read when first needed
  std::set<uint64_t> compacted_;  // compacted once; not picked again while they last
  std::set<uint64_t> removing_;   // handed to remover_ and not removed yet: not handed again
  bool compacting_ = false;
  // Start-up only: ledgers the replay knows of (to find records past damage
  // and to drop records of deleted ones) and the last entry of each it saw
  // (an entry at or below it is a copy made by compaction).
  std::unordered_set<LedgerId> replay_ledgers_;
  std::unordered_map<LedgerId, EntryId> replay_last_;

  common::Counter& cache_hits_;
  common::Counter& cache_misses_;
  common::Counter& read_errors_;
  common::Counter& damaged_bytes_;
  common::Counter& compacted_segments_;
  common::Counter& compacted_bytes_;
  common::Gauge& dead_bytes_;
};

}  // namespace magnetar::storage
