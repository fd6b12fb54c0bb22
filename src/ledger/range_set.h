// RangeSet: a set of Positions that stays small when millions of scattered
// entries are in it (a cursor's individually acknowledged entries).
//
// Each ledger's entry ids are cut into chunks of kChunkEntries. A chunk is
// either full (no bitmap: a run of acks costs nothing per entry) or a bitmap
// of kChunkEntries bits; absent chunks are empty. One million entries acked
// one in two cost about 125 KB, not one tree node each.
//
// Not thread-safe: owned by the cursor's home reactor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "common/lazy_map.h"
#include "ledger/position.h"

namespace magnetar::ledger {

class RangeSet {
 public:
  static constexpr uint64_t kChunkEntries = 4096;

  // REQUIRES: p.entry >= 0.
  void add(Position p);
  // Adds entries first..last of one ledger. REQUIRES: 0 <= first <= last.
  void add_range(LedgerId ledger, EntryId first, EntryId last);
  bool contains(Position p) const;
  // Removes every position <= p.
  void remove_through(Position p);
  // How many of entries first..last of `ledger` are in the set.
  uint64_t count_in(LedgerId ledger, EntryId first, EntryId last) const;
  // The first entry id >= from of `ledger` that is not in the set.
  EntryId first_absent(LedgerId ledger, EntryId from) const;
  uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void clear();
  // Maximal runs of consecutive entries, in order: (ledger, first, last).
  struct Range {
    LedgerId ledger;
    EntryId first;
    EntryId last;
    bool operator==(const Range&) const = default;
  };
  // The first `max` runs (those of the lowest positions); the walk stops
  // there, so its cost follows `max`, not the size of the set.
  std::vector<Range> ranges(size_t max = SIZE_MAX) const;
  // Heap bytes held by bitmaps and map nodes (approximate).
  size_t memory_bytes() const;

 private:
  static constexpr size_t kWords = kChunkEntries / 64;
  struct Chunk {
    uint32_t count = 0;               // entries present
    std::unique_ptr<uint64_t[]> bits;  // null when full or empty
    bool full() const { return count == kChunkEntries; }
    bool test(uint64_t i) const { return full() || (bits && ((bits[i / 64] >> (i % 64)) & 1)); }
  };
  using Key = std::pair<LedgerId, uint64_t>;  // (ledger, entry / kChunkEntries)
  static void materialize(Chunk& c);
  // Sets bits [from, to] of `c`; returns how many were newly set.
  static uint32_t set_bits(Chunk& c, uint64_t from, uint64_t to);

  common::LazyMap<Key, Chunk> chunks_;
  uint64_t size_ = 0;
};

}  // namespace magnetar::ledger
