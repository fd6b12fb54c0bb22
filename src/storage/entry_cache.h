// EntryCache: recent entries in memory, bounded by bytes.
//
// For each ledger the cache holds up to kMaxRuns runs of consecutive
// entries. Inserting the next entry of a run extends it; inserting anything
// else starts a new run (past kMaxRuns, the run used least recently is
// dropped). Tailing readers find what was just added; read-ahead fills a run
// past what a catch-up reader asked for, and readers at different places in
// one ledger each keep their own run instead of evicting each other's. The byte
// budget is shared by all ledgers, so one busy ledger can use all of it; when
// over budget the oldest entries of the inserting shard go first. The cache keeps the entries'
// Slices, so it pins their buffers.
//
// Thread-safe: sharded by ledger, one mutex per shard.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "storage/storage.h"

namespace magnetar::storage {

class EntryCache {
 public:
  explicit EntryCache(size_t capacity_bytes);
  EntryCache(const EntryCache&) = delete;
  EntryCache& operator=(const EntryCache&) = delete;

  void insert(LedgerId ledger, EntryId entry, common::Slice data);
  std::optional<common::Slice> get(LedgerId ledger, EntryId entry) const;
  // Appends entries first, first+1, ... while cached and while `out` stays
  // under max_bytes (the first always fits); returns how many it added.
  size_t get_range(LedgerId ledger, EntryId first, EntryId last, size_t max_bytes, std::vector<Entry>* out,
                   size_t* bytes) const;
  void erase_ledger(LedgerId ledger);
  size_t size_bytes() const;

 private:
  static constexpr size_t kShards = 16;
  static constexpr size_t kMaxRuns = 4;
  struct Run {
    EntryId first = 0;
    std::deque<common::Slice> entries;
    mutable uint64_t used = 0;  // the shard's clock when last inserted into or read
    EntryId end() const { return first + static_cast<EntryId>(entries.size()); }
    bool holds(EntryId e) const { return e >= first && e < end(); }
  };
  using Runs = std::vector<Run>;
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<LedgerId, Runs> runs;
    mutable uint64_t clock = 0;
    // Insertion order, for eviction; entries dropped with their run stay
    // here until they reach the front (or a compaction) and are skipped.
    std::deque<std::pair<LedgerId, EntryId>> order;
    size_t bytes = 0;
    size_t live = 0;
  };
  Shard& shard(LedgerId ledger) const { return shards_[ledger % kShards]; }
  // The run of `ledger` holding `entry`, or null. Caller holds s.mu.
  static const Run* find_run(const Shard& s, LedgerId ledger, EntryId entry);
  void drop_run(Shard& s, Runs& runs, size_t i);
  void evict(Shard& s);
  // Keeps s.bytes and the shared total in step. Caller holds s.mu.
  void account(Shard& s, size_t added, size_t removed);

  const size_t capacity_;
  std::atomic<size_t> total_{0};
  mutable Shard shards_[kShards];
};

}  // namespace magnetar::storage
