// Position: where an entry sits in a topic's log, (ledger id, entry id).
//
// Ledgers of one managed ledger are created with increasing ids, so
// positions order by ledger first, then entry.
#pragma once

#include <compare>
#include <cstdint>
#include <string>

#include "storage/storage.h"

namespace magnetar::ledger {

using storage::EntryId;
using storage::LedgerId;

struct Position {
  LedgerId ledger = 0;
  EntryId entry = storage::kNoEntry;

  auto operator<=>(const Position&) const = default;
  std::string to_string() const { return std::to_string(ledger) + ":" + std::to_string(entry); }
};

// The position just before `p` in its ledger (entry kNoEntry before the
// first): where a cursor stands to read `p` next.
inline Position before(Position p) { return Position{p.ledger, p.entry - 1}; }

}  // namespace magnetar::ledger
