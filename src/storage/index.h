// Index: where each entry lives on disk, plus ledger metadata, in LevelDB.
//
// Written behind the journal (by the journal thread, after each group commit
// is durable) and rebuilt at start-up from the segments past its checkpoint.
// Keys (integers big-endian so that they sort):
//   'c'                              -> checkpoint: segment (8), offset (8)
//   'd'                              -> durable point: segment (8), offset (8)
//   'l' ledger(8)                    -> ledger: closed (1), last entry (8)
//   'e' ledger(8) last_entry(8)      -> run: first entry (8), segment (varint),
//                                       count (varint), count x (gap, size) varints
//   's' segment(8) ledger(8)         -> "" (the segment holds entries of the ledger)
// A run is a stretch of consecutive entries of one ledger in one segment;
// `gap` is the distance from the previous record's end (the first one's is
// its absolute offset). One key per ledger per group commit, not per entry.
// Thread-safe: LevelDB serialises writers; readers see whole batches.
#pragma once

#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "common/status.h"
#include "storage/storage.h"

namespace magnetar::storage {

struct EntryLocation {
  uint64_t segment = 0;
  uint64_t offset = 0;  // of the record header
  uint32_t size = 0;    // record header + payload
  bool operator==(const EntryLocation&) const = default;
};

struct LedgerMeta {
  LedgerId id = 0;
  bool closed = false;
  EntryId last_entry = kNoEntry;  // meaningful when closed
};

// A point in the segments: the checkpoint (everything in the segments
// before it is in the index) or the durable point (an fdatasync covered
// everything before it).
struct Checkpoint {
  uint64_t segment = 0;
  uint64_t offset = 0;
  bool operator==(const Checkpoint&) const = default;
  auto operator<=>(const Checkpoint&) const = default;
};

class Index {
 public:
  // Opens (creating if missing) the LevelDB database at `path`.
  // `env` null: LevelDB's default file system.
  static common::Result<std::unique_ptr<Index>> open(const std::string& path, leveldb::Env* env = nullptr);
  ~Index();
  Index(const Index&) = delete;
  Index& operator=(const Index&) = delete;

  // Updates collected by one thread, applied atomically by write().
  class Batch {
   public:
    // Entries of one ledger must come in increasing id order.
    void add_entry(LedgerId ledger, EntryId entry, const EntryLocation& loc);
    void put_ledger(const LedgerMeta& meta);
    void set_checkpoint(const Checkpoint& cp);
    void set_durable(const Checkpoint& cp);
    // The segment no longer holds entries of the ledger (they were all moved).
    void drop_segment_ref(uint64_t segment, LedgerId ledger);
    bool empty() const { return runs_.empty() && batch_.ApproximateSize() <= kEmptyBatchSize; }

   private:
    friend class Index;
    static constexpr size_t kEmptyBatchSize = 12;  // a WriteBatch's fixed header
    struct Run {
      EntryId first = 0;
      EntryId last = 0;
      uint64_t segment = 0;
      uint64_t end = 0;  // end offset of the last record
      std::string locations;
    };
    void flush_run(LedgerId ledger, const Run& run);
    std::map<LedgerId, Run> runs_;
    leveldb::WriteBatch batch_;
  };

  // Applies and clears `batch`. `sync` makes it durable before returning.
  common::Status write(Batch& batch, bool sync);
  // Removes the ledger's metadata, runs and segment references. Fills
  // `segments` with the segments that held its entries.
  common::Status delete_ledger(LedgerId ledger, std::set<uint64_t>* segments);
  // Points entries first, first+1, ... at `to` (one location each), keeping
  // every run whole and runs disjoint. With `expect`, entry first+i moves
  // only while the index has it at expect[i] (an entry of a ledger deleted
  // or moved meanwhile stays as the index has it); without, it moves (or is
  // added) unconditionally. Sets (*moved)[i] for each entry moved when
  // `moved` is given. Applied as one atomic, unsynced write.
  // REQUIRES: one writer at a time (the journal's listener, or recovery).
  common::Status relocate(LedgerId ledger, EntryId first, const std::vector<EntryLocation>& to,
                          const std::vector<EntryLocation>* expect, std::vector<bool>* moved);
  // Locations of entries first, first+1, ... (at most max_entries), stopping
  // at the first entry the index does not hold. Empty if `first` is missing.
  common::Result<std::vector<EntryLocation>> lookup(LedgerId ledger, EntryId first,
                                                    size_t max_entries) const;
  // Highest indexed entry of the ledger, kNoEntry if none.
  common::Result<EntryId> last_entry(LedgerId ledger) const;

  common::Result<Checkpoint> checkpoint() const;
  // The durable point last written; nullopt when never written (a directory
  // from before it was kept).
  common::Result<std::optional<Checkpoint>> durable() const;
  // Forgets every entry located at or after `from` (a ledger keeps the
  // entries before it; one that lost entries is open again) and sets the
  // checkpoint there, synced: what lies past `from` is replayed from the
  // segments as they are on disk. Returns how many entries were forgotten.
  common::Result<uint64_t> rewind(const Checkpoint& from);
  common::Result<std::vector<LedgerMeta>> ledgers() const;
  // segment -> ledgers with entries in it.
  common::Result<std::map<uint64_t, std::set<LedgerId>>> segment_refs() const;
  // segment -> ledger -> bytes of the records the index points at there
  // (header and payload). Reads every run: made once at start-up.
  common::Result<std::map<uint64_t, std::unordered_map<LedgerId, uint64_t>>> segment_usage() const;

 private:
  explicit Index(leveldb::DB* db) : db_(db) {}
  leveldb::DB* db_;
};

}  // namespace magnetar::storage
