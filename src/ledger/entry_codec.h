// How a managed-ledger entry is laid out in a storage entry: the one place
// that writes and reads it.
//
// Entry is header length (4 bytes, little-endian), the EntryHeader
// FlatBuffers table (records.fbs), then the payload (Pulsar's wire format:
// MessageMetadata + payload, batches as Pulsar batches).
#pragma once

#include <cstdint>
#include <string>

#include "common/bytes.h"
#include "common/result.h"

namespace magnetar::ledger {

struct MessageHeader {
  int64_t publish_time_ms = 0;
  std::string producer;
  int64_t sequence_id = 0;
  uint32_t messages = 1;    // messages in the entry (a batch holds several)
  int64_t first_index = 0;  // topic-wide index of the first message; set by the managed ledger
  // The key that orders the entry in Key_Shared subscriptions (Pulsar's
  // ordering key, else its partition key; Kafka's record key); empty when none.
  std::string key;
  // Delayed delivery: not dispatched before this wall-clock time (ms); 0 = now.
  int64_t deliver_at_ms = 0;
  // One chunk of a message sent in chunks (Pulsar's chunking), not its
  // last: every chunk carries the message's sequence id, so deduplication
  // judges and records the message by its last chunk alone.
  bool more_chunks = false;
  // Set in a compacted ledger's entries only (ManagedLedger::compacted()):
  // the entry's position in the topic's log, which readers of the compacted
  // view see. 0: an entry of the log itself.
  uint64_t origin_ledger = 0;
  int64_t origin_entry = -1;
};

common::Slice encode_entry(const MessageHeader& header, const common::Slice& payload);
// The payload is a view of `entry`'s buffer. kCorruption when malformed.
common::Result<std::pair<MessageHeader, common::Slice>> decode_entry(const common::Slice& entry);

}  // namespace magnetar::ledger
