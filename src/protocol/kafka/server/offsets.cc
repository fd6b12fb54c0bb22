#include "protocol/kafka/server/offsets.h"

#include "ledger/managed_ledger.h"

namespace magnetar::protocol::kafka {

int64_t log_start_offset(const ledger::Log& log) {
  if (const auto* managed = dynamic_cast<const ledger::ManagedLedger*>(&log)) return managed->compacted_first_index();
  const auto& chain = log.chain();
  return chain.empty() ? log.next_message_index() : chain.ledgers().front().first_index;
}

int64_t high_watermark(const ledger::Log& log) {
  const auto& ledgers = log.chain().ledgers();
  if (ledgers.empty()) return log.next_message_index();
  // The newest ledger holding stored entries ends the readable part; a
  // newer, empty ledger starts where it ends once its adds complete.
  for (auto it = ledgers.rbegin(); it != ledgers.rend(); ++it) {
    if (it->entries == 0) continue;
    if (!it->runs_complete()) return log.next_message_index();
    return it->first_index + static_cast<int64_t>(it->messages);
  }
  return ledgers.back().first_index;
}

}  // namespace magnetar::protocol::kafka
