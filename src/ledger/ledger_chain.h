// LedgerChain: the storage ledgers that make up one topic's log, oldest
// first, with how many entries and bytes each holds.
//
// Not thread-safe: owned by the managed ledger's home reactor.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ledger/position.h"

namespace magnetar::ledger {

struct ChainLedger {
  LedgerId id = 0;
  EntryId entries = 0;     // entries it holds; the last ledger may still grow
  uint64_t size = 0;       // payload bytes
  int64_t created_ms = 0;  // wall clock at creation
  int64_t first_index = 0; // topic-wide index of its first message
};

class LedgerChain {
 public:
  const std::vector<ChainLedger>& ledgers() const { return ledgers_; }
  bool empty() const { return ledgers_.empty(); }
  // REQUIRES: id is greater than every id in the chain.
  void append(const ChainLedger& ledger) { ledgers_.push_back(ledger); }
  // REQUIRES: !empty().
  ChainLedger& back() { return ledgers_.back(); }
  const ChainLedger& back() const { return ledgers_.back(); }
  const ChainLedger* find(LedgerId id) const;
  // Drops the oldest `n` ledgers.
  void drop_front(size_t n);

  // The entry right after p (p may be in a ledger no longer in the chain, or
  // (ledger, -1) for "before its first entry"); nullopt at the end.
  std::optional<Position> next(Position p) const;
  // Entries after p, to the end of the chain.
  uint64_t entries_after(Position p) const;
  // True when p names an entry the chain holds.
  bool contains(Position p) const;
  // The last entry, or (first ledger, -1) when the chain holds no entry;
  // REQUIRES: !empty().
  Position last_position() const;
  uint64_t total_entries() const;
  uint64_t total_size() const;

 private:
  std::vector<ChainLedger> ledgers_;
};

}  // namespace magnetar::ledger
