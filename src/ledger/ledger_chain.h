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

// `entries` consecutive entries holding `messages` messages each.
struct MessageRun {
  uint32_t messages = 1;
  EntryId entries = 0;
  bool operator==(const MessageRun&) const = default;
};

struct ChainLedger {
  LedgerId id = 0;
  EntryId entries = 0;     // entries it holds; the last ledger may still grow
  uint64_t size = 0;       // payload bytes
  int64_t created_ms = 0;  // wall clock at creation
  int64_t first_index = 0; // topic-wide index of its first message
  // Messages per entry, run-length encoded: one run for a topic without
  // batches. Covers every entry when runs_complete().
  std::vector<MessageRun> runs{};
  uint64_t messages = 0;   // sum over runs

  void record_entry(uint32_t entry_messages);
  bool runs_complete() const;
  // Messages in entries [0, entry). REQUIRES: 0 <= entry <= entries.
  uint64_t messages_before(EntryId entry) const;
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
  uint64_t total_messages() const;
  // Messages in the chain before entry p (p may be one past a ledger's last
  // entry). REQUIRES: p.ledger is in the chain.
  uint64_t messages_before(Position p) const;
  // The entry holding topic-wide message `index` (see ChainLedger::first_index),
  // found from the in-memory message runs. nullopt when no ledger holds it,
  // or when that ledger's runs are incomplete (then ManagedLedger::seek_by_index
  // reads entries to find it).
  std::optional<Position> entry_of_index(int64_t index) const;

 private:
  std::vector<ChainLedger> ledgers_;
};

}  // namespace magnetar::ledger
