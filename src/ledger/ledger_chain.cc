#include "ledger/ledger_chain.h"

#include <algorithm>

namespace magnetar::ledger {

const ChainLedger* LedgerChain::find(LedgerId id) const {
  auto it = std::lower_bound(ledgers_.begin(), ledgers_.end(), id,
                             [](const ChainLedger& l, LedgerId v) { return l.id < v; });
  return it != ledgers_.end() && it->id == id ? &*it : nullptr;
}

void LedgerChain::drop_front(size_t n) {
  ledgers_.erase(ledgers_.begin(), ledgers_.begin() + static_cast<std::ptrdiff_t>(std::min(n, ledgers_.size())));
}

std::optional<Position> LedgerChain::next(Position p) const {
  for (const ChainLedger& l : ledgers_) {
    if (l.id < p.ledger) continue;
    if (l.id == p.ledger) {
      if (p.entry + 1 < l.entries) return Position{l.id, p.entry + 1};
      continue;
    }
    if (l.entries > 0) return Position{l.id, 0};
  }
  return std::nullopt;
}

uint64_t LedgerChain::entries_after(Position p) const {
  uint64_t n = 0;
  for (const ChainLedger& l : ledgers_) {
    if (l.id > p.ledger) {
      n += static_cast<uint64_t>(l.entries);
    } else if (l.id == p.ledger && l.entries > p.entry + 1) {
      n += static_cast<uint64_t>(l.entries - (p.entry + 1));
    }
  }
  return n;
}

bool LedgerChain::contains(Position p) const {
  const ChainLedger* l = find(p.ledger);
  return l != nullptr && p.entry >= 0 && p.entry < l->entries;
}

Position LedgerChain::last_position() const {
  for (auto it = ledgers_.rbegin(); it != ledgers_.rend(); ++it) {
    if (it->entries > 0) return Position{it->id, it->entries - 1};
  }
  return Position{ledgers_.front().id, storage::kNoEntry};
}

uint64_t LedgerChain::total_entries() const {
  uint64_t n = 0;
  for (const ChainLedger& l : ledgers_) n += static_cast<uint64_t>(l.entries);
  return n;
}

void ChainLedger::record_entry(uint32_t entry_messages) {
  if (!runs.empty() && runs.back().messages == entry_messages) {
    ++runs.back().entries;
  } else {
    runs.push_back(MessageRun{entry_messages, 1});
  }
  messages += entry_messages;
}

bool ChainLedger::runs_complete() const {
  EntryId covered = 0;
  for (const MessageRun& r : runs) covered += r.entries;
  return covered == entries;
}

uint64_t ChainLedger::messages_before(EntryId entry) const {
  uint64_t n = 0;
  for (const MessageRun& r : runs) {
    if (entry <= 0) break;
    EntryId take = std::min(entry, r.entries);
    n += static_cast<uint64_t>(take) * r.messages;
    entry -= take;
  }
  return n;
}

uint64_t LedgerChain::total_messages() const {
  uint64_t n = 0;
  for (const ChainLedger& l : ledgers_) n += l.messages;
  return n;
}

uint64_t LedgerChain::messages_before(Position p) const {
  uint64_t n = 0;
  for (const ChainLedger& l : ledgers_) {
    if (l.id == p.ledger) return n + l.messages_before(std::max<EntryId>(p.entry, 0));
    n += l.messages;
  }
  return n;
}

std::optional<Position> LedgerChain::entry_of_index(int64_t index) const {
  for (const ChainLedger& l : ledgers_) {
    if (index < l.first_index || index >= l.first_index + static_cast<int64_t>(l.messages)) continue;
    if (!l.runs_complete()) return std::nullopt;
    int64_t left = index - l.first_index;
    EntryId entry = 0;
    for (const MessageRun& r : l.runs) {
      int64_t in_run = static_cast<int64_t>(r.entries) * r.messages;
      if (left < in_run) return Position{l.id, entry + static_cast<EntryId>(left / r.messages)};
      left -= in_run;
      entry += r.entries;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

uint64_t LedgerChain::total_size() const {
  uint64_t n = 0;
  for (const ChainLedger& l : ledgers_) n += l.size;
  return n;
}

}  // namespace magnetar::ledger
