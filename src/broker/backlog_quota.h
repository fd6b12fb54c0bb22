// Backlog quota: how much unacknowledged data a subscription may keep
// before the namespace's policy acts (Pulsar's backlog quotas).
//
// The backlog of a topic is that of its slowest durable subscription, in
// bytes estimated from the ledgers' sizes (a partly consumed ledger counts
// in proportion to the entries left in it) for the destination_storage
// quota, and by the publish time of its oldest entry for the message_age
// quota (checked on the maintenance timer). What happens past a limit:
//   producer_request_hold      new producers are refused
//                              (ProducerBlockedQuotaExceededError) and SENDs
//                              are held, unstored and unanswered, until the
//                              backlog is under the limit again;
//   producer_exception         producers are closed, new ones are refused
//                              and SENDs fail (ProducerBlockedQuotaExceededException);
//   consumer_backlog_eviction  the slowest subscriptions are moved forward
//                              (their oldest messages acknowledged) so the
//                              backlog fits: by size, or every message older
//                              than the time limit.
// These functions are the arithmetic; Topic applies them on produce and on
// the broker's maintenance timer.
#pragma once

#include <cstdint>
#include <optional>

#include "broker/policies.h"
#include "ledger/ledger_chain.h"
#include "ledger/position.h"

namespace magnetar::broker {

// Estimated bytes of the entries after `mark_delete` (everything in the
// chain after it).
uint64_t backlog_bytes_after(const ledger::LedgerChain& chain, ledger::Position mark_delete);

// The entry to acknowledge through (cumulatively) so that what follows it
// holds at most `limit_bytes`; nullopt when the backlog after `mark_delete`
// already fits or no whole entry can be dropped.
std::optional<ledger::Position> eviction_point(const ledger::LedgerChain& chain, ledger::Position mark_delete,
                                               uint64_t limit_bytes);

// True when `backlog_bytes` is over the quota's size limit (a limit of -1
// never is).
bool over_size_quota(const BacklogQuota& quota, uint64_t backlog_bytes);

// True when the oldest backlog message, published at `oldest_publish_ms`
// (0: unknown), is older than the quota's time limit at `now_ms` (a limit
// of -1 never is).
bool over_age_quota(const BacklogQuota& quota, int64_t oldest_publish_ms, int64_t now_ms);

}  // namespace magnetar::broker
