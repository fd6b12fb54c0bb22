#include "broker/backlog_quota.h"

namespace magnetar::broker {

using ledger::ChainLedger;
using ledger::Position;

namespace {

// Entries of `l` after entry `after` (after = -1: all of them).
uint64_t entries_after_in(const ChainLedger& l, ledger::EntryId after) {
  if (l.entries <= 0) return 0;
  int64_t left = l.entries - (after + 1);
  return left > 0 ? static_cast<uint64_t>(left) : 0;
}

uint64_t bytes_of(const ChainLedger& l, uint64_t entries) {
  if (l.entries <= 0) return 0;
  return static_cast<uint64_t>(static_cast<long double>(l.size) * entries / l.entries);
}

}  // namespace

uint64_t backlog_bytes_after(const ledger::LedgerChain& chain, Position mark_delete) {
  uint64_t total = 0;
  for (const auto& l : chain.ledgers()) {
    if (l.id < mark_delete.ledger) continue;
    if (l.id == mark_delete.ledger) {
      total += bytes_of(l, entries_after_in(l, mark_delete.entry));
    } else {
      total += l.size;
    }
  }
  return total;
}

std::optional<Position> eviction_point(const ledger::LedgerChain& chain, Position mark_delete, uint64_t limit_bytes) {
  if (backlog_bytes_after(chain, mark_delete) <= limit_bytes) return std::nullopt;
  // Walk back from the newest ledger, keeping whole ledgers while they fit.
  uint64_t kept = 0;
  const auto& ledgers = chain.ledgers();
  for (size_t i = ledgers.size(); i-- > 0;) {
    const ChainLedger& l = ledgers[i];
    ledger::EntryId first_counted = l.id == mark_delete.ledger ? mark_delete.entry + 1 : 0;
    uint64_t counted = entries_after_in(l, first_counted - 1);
    uint64_t bytes = bytes_of(l, counted);
    if (kept + bytes <= limit_bytes) {
      kept += bytes;
      if (l.id <= mark_delete.ledger) return std::nullopt;
      continue;
    }
    // Keep as many of this ledger's last entries as fit.
    uint64_t per_entry = l.entries > 0 ? std::max<uint64_t>(1, l.size / static_cast<uint64_t>(l.entries)) : 1;
    uint64_t keep = (limit_bytes - kept) / per_entry;
    ledger::EntryId through = l.entries - 1 - static_cast<ledger::EntryId>(keep);
    if (through >= 0) {
      Position p{l.id, through};
      return p > mark_delete ? std::optional<Position>(p) : std::nullopt;
    }
    // Nothing of this ledger is dropped: acknowledge through the previous one's end.
    for (size_t j = i; j-- > 0;) {
      if (ledgers[j].entries > 0) {
        Position p{ledgers[j].id, ledgers[j].entries - 1};
        return p > mark_delete ? std::optional<Position>(p) : std::nullopt;
      }
    }
    return std::nullopt;
  }
  return std::nullopt;
}

bool over_age_quota(const BacklogQuota& quota, int64_t oldest_publish_ms, int64_t now_ms) {
  if (quota.limit_time < 0 || oldest_publish_ms <= 0) return false;
  return now_ms - oldest_publish_ms > quota.limit_time * 1000;
}

bool over_size_quota(const BacklogQuota& quota, uint64_t backlog_bytes) {
  return quota.limit_size >= 0 && backlog_bytes > static_cast<uint64_t>(quota.limit_size);
}

}  // namespace magnetar::broker
