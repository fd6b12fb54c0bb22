// Storage: durable entries on local disk, (ledger id, entry id) -> bytes.
//
// A ledger is append-only with one writer. create_ledger/open_ledger attach
// the caller as the writer and hand back a LedgerWriter token; adds must
// present it. Opening a ledger that already has a writer is refused with
// kFenced, and close_ledger seals a ledger whoever writes it: later adds by
// its writer fail with kFenced. A closed ledger is immutable.
//
// Threads: every method may be called from any thread. Callbacks run on the
// reactor that called (Reactor::current()), never inline inside the call.
// When the caller is not on a reactor they run on a storage thread (journal
// or reader), which they must not block, or inline for an answer known at
// once (an invalid argument, an unknown ledger).
//
// Errors: an add that fails (disk full, I/O error) fails every later add of
// that ledger too, so a ledger never has a hole; its writer closes it and
// moves on to a new ledger. Reads keep working whatever the writer side does.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "common/result.h"
#include "common/status.h"
#include "runtime/component.h"

namespace leveldb {
class Env;
}

namespace magnetar::storage {

class FileOps;

using LedgerId = uint64_t;
using EntryId = int64_t;
inline constexpr EntryId kNoEntry = -1;  // "no entry yet": an empty ledger's last entry

struct Entry {
  LedgerId ledger = 0;
  EntryId id = kNoEntry;
  common::Slice data;
};

// Proof of being a ledger's writer. Copyable; meaningless for another ledger.
struct LedgerWriter {
  LedgerId ledger = 0;
  uint64_t token = 0;
};

struct LedgerInfo {
  LedgerId id = 0;
  bool closed = false;
  // Highest entry whose add completed; for a closed ledger its last entry.
  EntryId last_confirmed = kNoEntry;
};

enum class FsyncMode {
  kAlways,    // an add completes after the fdatasync of its group commit (default)
  kInterval,  // an add completes after write(); fdatasync every fsync_interval
  kNever,     // an add completes after write(); the OS flushes when it likes
};

struct StorageOptions {
  std::string directory;  // holds segments/ and index/; created if missing
  // For ledgers without a mode of their own (Storage::set_fsync).
  FsyncMode fsync_mode = FsyncMode::kAlways;
  std::chrono::milliseconds fsync_interval{100};
  // Group commit: a batch closes at this many entries or bytes, or this long
  // after its first append arrived, whichever comes first. No delay by
  // default: what arrives while a batch is written and synced joins the
  // next one anyway, and a journal that woke from idle and then waited
  // 50 us for company paid a timed wait and a thread switch per group
  // commit at moderate load (8 producers at 3,000 msg/s each: publish p50
  // 1.1-1.8 ms without the wait against 1.4-1.9 ms with it; unbatched, as
  // fast as one producer goes: 136,000-139,000 msg/s against 130,000-131,000).
  size_t max_batch_entries = 4096;
  size_t max_batch_bytes = 4u << 20;
  std::chrono::microseconds max_batch_delay{0};
  // While an fdatasync runs, the next write waits for it to return unless
  // this many bytes are queued (0: write at once). Appending to a file
  // under an fdatasync of it makes that sync, and every add waiting for
  // it, slower (ext4: a 100 KiB write stream at 275 MiB/s, fdatasync p99.9
  // 9-15 ms beside the writes, 1.5-2.2 ms between them); past this much
  // queued, overlapping the two is what keeps up. Below a quarter of it,
  // with the sync thread idle, the journal thread runs the sync and the
  // completions itself (0 here: never).
  size_t sync_exclusive_bytes = 1u << 20;
  // Back-pressure: appends waiting for the journal beyond these fail with
  // kResourceExhausted.
  size_t max_queued_entries = 1u << 16;
  size_t max_queued_bytes = 256u << 20;
  uint64_t segment_size = 256u << 20;  // a segment rolls over past this
  // Segment compaction: a sealed segment whose live records (those of
  // ledgers not deleted) fill less than this fraction of it has them copied
  // to the active segment, after which it is removed. 0: never.
  double compact_ratio = 0.5;
  // Compaction reads and copies at most this many bytes of a segment before
  // its copies are written, so appends never wait long behind it.
  size_t compact_step_bytes = 4u << 20;
  size_t tail_cache_bytes = 64u << 20;       // recently added entries
  size_t read_ahead_cache_bytes = 32u << 20;  // entries read from disk
  // Extra entries read past a miss: as many as were asked for, up to this
  // (a one-entry probe, as a seek makes, reads one more, not a window).
  size_t read_ahead_entries = 256;
  // Threads reading from disk: readers of different ledgers do not wait
  // for each other's reads (one ledger's reads run on one of them).
  size_t read_threads = 4;
  size_t max_read_bytes = 8u << 20;          // one read returns at most this (but >= 1 entry)
  // The file system calls on segments (file_ops.h); null: the real ones.
  std::shared_ptr<FileOps> file_ops;
  // The file system the index (LevelDB) uses; null: LevelDB's default. Must
  // outlive the storage.
  leveldb::Env* index_env = nullptr;
};

template <typename T>
using Callback = std::function<void(T)>;

// How many copies of a ledger a replicated storage keeps (0: its defaults).
// Local storage keeps one whatever they say.
struct LedgerOptions {
  int ensemble = 0;      // storage nodes the ledger's entries are spread over
  int write_quorum = 0;  // copies of each entry
  int ack_quorum = 0;    // copies stored before an add completes
  // Storage groups the copies are kept in (a namespace's bookie affinity
  // group, comma-separated names); empty: any storage node.
  std::string affinity_primary;
  std::string affinity_secondary;
};

class Storage : public runtime::Component {
 public:
  // Creates an empty, open ledger with the caller as its writer.
  // kAlreadyExists if `id` exists. Completes once the creation is durable.
  virtual void create_ledger(LedgerId id, Callback<common::Result<LedgerWriter>> done) = 0;
  // The same, with the copies `options` ask for where the storage keeps several.
  virtual void create_ledger_with(LedgerId id, const LedgerOptions& options,
                                  Callback<common::Result<LedgerWriter>> done) {
    (void)options;
    create_ledger(id, std::move(done));
  }
  // Attaches the caller as the writer of an existing open ledger (e.g. after a
  // restart). kFenced if it has a writer, kFailedPrecondition if closed,
  // kNotFound if missing. Immediate: nothing is written.
  virtual void open_ledger(LedgerId id, Callback<common::Result<LedgerWriter>> done) = 0;
  // Appends entry `entry` (which must be the ledger's last added + 1) to the
  // writer's ledger. Completes with ok once durable per the fsync mode; then
  // last_confirmed >= entry. kFenced once the ledger is closed or the writer
  // is not the ledger's; kInvalidArgument for an out-of-order id or an
  // oversized payload; kResourceExhausted when the journal queue is full.
  virtual void add_entry(const LedgerWriter& writer, EntryId entry, common::Slice data,
                         Callback<common::Status> done) = 0;
  // How the ledger's records are made durable from now on, in place of the
  // node's StorageOptions::fsync_mode (nullopt: the node's again); `interval`
  // is kInterval's longest wait before an fdatasync. Records written in one
  // group commit are synced together, so a kNever ledger's add may wait for
  // another ledger's sync. kNotFound if missing. Immediate.
  virtual common::Status set_fsync(LedgerId id, std::optional<FsyncMode> mode,
                                   std::chrono::milliseconds interval) = 0;
  // Seals the ledger at its last confirmed entry and returns that entry.
  // Adds already submitted complete (or fail) first. Idempotent on a closed ledger.
  virtual void close_ledger(LedgerId id, Callback<common::Result<EntryId>> done) = 0;
  // Reads entries first..last (REQUIRES 0 <= first <= last <= last_confirmed).
  // The result starts at `first` and may stop early (max_read_bytes, or a
  // damaged entry: then the next read starting there fails with kCorruption).
  virtual void read_entries(LedgerId id, EntryId first, EntryId last,
                            Callback<common::Result<std::vector<Entry>>> done) = 0;
  // Removes the ledger; its disk space is reclaimed once no live ledger shares
  // its segments, or once compaction has copied the live records out of a
  // segment it left mostly dead (StorageOptions::compact_ratio). Completes
  // once the deletion is durable.
  virtual void delete_ledger(LedgerId id, Callback<common::Status> done) = 0;

  // Immediate: what is known in memory now. kNotFound if missing.
  virtual common::Result<LedgerInfo> ledger_info(LedgerId id) const = 0;
  common::Result<EntryId> last_confirmed(LedgerId id) const {
    auto info = ledger_info(id);
    if (!info) return info.status();
    return info->last_confirmed;
  }
  virtual std::vector<LedgerId> list_ledgers() const = 0;
};

// The local-disk implementation (storage_impl.h). start() recovers the
// directory; stop() completes queued adds, syncs and closes.
std::unique_ptr<Storage> make_local_storage(StorageOptions options);

}  // namespace magnetar::storage
