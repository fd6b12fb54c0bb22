// Cursor: a subscription's position in a topic's log.
//
// Everything at or before the mark-delete position is acknowledged; after it,
// individually acknowledged entries live in a RangeSet and partly
// acknowledged batch entries keep a bitmap of their acknowledged messages.
// The mark-delete position moves forward over every entry acknowledged right
// after it, so the sets hold only the holes' far side.
//
// A durable cursor's state is persisted by the managed ledger (encode /
// decode, records.fbs CursorState); a non-durable one (a reader) is not.
// The persisted state is bounded (CursorPersistLimits): acknowledgements past
// the bound live only in memory and are redelivered after a restart.
// Not thread-safe: owned by the managed ledger's home reactor.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/lazy_map.h"
#include "common/result.h"
#include "common/status.h"
#include "ledger/ledger_chain.h"
#include "ledger/position.h"
#include "ledger/range_set.h"

namespace magnetar::ledger {

// How much of a cursor's state encode() persists, as Pulsar's
// managedLedgerMaxUnackedRangesToPersist and
// managedLedgerMaxBatchDeletedIndexToPersist. A consumer that acknowledges
// out of order leaves one range per hole; without a bound the record, which
// is rewritten on every acknowledgement, grows with the backlog. What is left
// out is unacknowledged once decoded: redelivered (at least once), never
// taken for acknowledged.
struct CursorPersistLimits {
  // Acknowledged ranges kept: those nearest the mark-delete position.
  size_t max_ranges = 10'000;
  // Partly acknowledged batch entries kept, nearest first; the others lose
  // their message bitmaps (their acknowledged messages come again).
  size_t max_batch_entries = 10'000;
};

class Cursor {
 public:
  Cursor(std::string name, Position mark_delete, bool durable);

  const std::string& name() const { return name_; }
  bool durable() const { return durable_; }
  Position mark_delete_position() const { return mark_delete_; }
  const RangeSet& individually_acknowledged() const { return acked_; }
  // A replicated subscription's cursor (georep/replicator.h); persisted with it.
  bool replicated() const { return replicated_; }
  void set_replicated(bool on) { replicated_ = on; }

  // Acknowledges entry p. kInvalidArgument if the chain does not hold it,
  // unless p is before the chain's first ledger (an entry of a dropped
  // ledger a compacted-view reader was handed): then the mark-delete
  // position moves up to p. Acknowledging twice is harmless.
  common::Status ack(Position p, const LedgerChain& chain);
  // Acknowledges every entry up to and including p.
  common::Status ack_cumulative(Position p, const LedgerChain& chain);
  // Acknowledges message `index` of the batch entry p holding `batch_size`
  // messages; once every message is, the entry itself is acknowledged.
  common::Status ack_batch_index(Position p, uint32_t index, uint32_t batch_size, const LedgerChain& chain);

  bool is_acknowledged(Position p) const;
  // Bitmap of the acknowledged messages of batch entry p (bit i = message
  // i); empty when none or the whole entry is acknowledged.
  std::vector<uint64_t> batch_acks(Position p) const;
  // The first entry after `from` that is not acknowledged, if any.
  std::optional<Position> next_unacknowledged(Position from, const LedgerChain& chain) const;
  // Entries after the mark-delete position not individually acknowledged.
  uint64_t backlog_entries(const LedgerChain& chain) const;
  // Messages in those entries, less the acknowledged messages of partly
  // acknowledged batches. Exact when every ledger's runs are complete.
  uint64_t backlog_messages(const LedgerChain& chain) const;
  // Moves the mark-delete position back or forward to p, dropping every
  // acknowledgement after it (a seek / reset).
  void reset(Position p);
  // Called when the chain lost ledgers (retention): the mark-delete position
  // moves up to just before the new first ledger if it was behind it.
  void skip_removed_ledgers(const LedgerChain& chain);

  // The mark-delete position exactly, and the acknowledgements after it
  // within `limits`. Costs O(limits), not O(holes).
  std::string encode(const CursorPersistLimits& limits = {}) const;
  static common::Result<Cursor> decode(std::string name, std::string_view bytes);

 private:
  // Moves the mark-delete position forward to p; true.
  bool ack_before_chain(Position p);
  struct Batch {
    uint32_t size = 0;
    std::vector<uint64_t> acked;
  };
  void advance(const LedgerChain& chain);

  std::string name_;
  bool durable_;
  Position mark_delete_;
  bool replicated_ = false;
  RangeSet acked_;
  common::LazyMap<Position, Batch> batches_;
};

}  // namespace magnetar::ledger
