// What message traces record of a stored entry (broker/tracing.h): the key
// and properties of each of its messages, read from Pulsar's wire format.
#pragma once

#include "broker/tracing.h"

namespace magnetar::protocol::pulsar {

// Reads `entry` (checksum, MessageMetadata, payload). A batch gives one
// TracedMessage per message; a compressed batch only its outer metadata's
// key and properties. An entry that does not parse gives none.
std::vector<broker::TracedMessage> describe_entry(const common::Slice& entry, uint32_t messages);

}  // namespace magnetar::protocol::pulsar
