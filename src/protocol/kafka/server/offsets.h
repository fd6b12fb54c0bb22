// Kafka offsets of a topic's log: message indexes (ledger::MessageHeader::
// first_index), contiguous from 0.
//
// Threads: on the log's home reactor.
#pragma once

#include <cstdint>

#include "ledger/log.h"

namespace magnetar::protocol::kafka {

// The first offset the log still holds (what retention left), its
// compacted view included.
int64_t log_start_offset(const ledger::Log& log);
// One past the last offset a read can return now: the end of the entries
// that are stored. Entries still being written already have offsets
// (Log::next_message_index counts them) but are not readable yet.
int64_t high_watermark(const ledger::Log& log);

}  // namespace magnetar::protocol::kafka
