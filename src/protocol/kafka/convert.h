// Kafka records <-> Pulsar messages: the one place that maps one onto the
// other, so that a Pulsar client reads what a Kafka client wrote and the
// reverse.
//
//   Kafka record            Pulsar message (in a batch entry)
//   key (null: none)        partition_key (null_partition_key when null)
//   value (null: none)      payload (null_value when null)
//   headers                 properties, in order (a null header value
//                           becomes "")
//   timestamp (CreateTime)  event_time; publish_time is the broker's clock
//   offset                  the topic-wide message index: the entry's
//                           first_index + the message's index in the batch
//
// A message topic compaction removed from a batch (compacted_out) is left
// out of the record batch, whose offsets still span the whole entry: a gap,
// as Kafka's own compacted logs have.
// A Kafka batch is stored as one Pulsar batch entry; a stored entry (batched
// or not) is served to Kafka as one record batch. An entry holding one chunk
// of a message a Pulsar producer sent in chunks is not served: a Kafka
// record carries whole messages only (see Fetch).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/bytes.h"
#include "common/status.h"
#include "ledger/entry_codec.h"
#include "protocol/pulsar/batch.h"
#include "protocol/kafka/record_batch.h"
#include "protocol/kafka/wire.h"

namespace magnetar::protocol::kafka {

struct ConvertedEntry {
  ledger::MessageHeader header;  // messages, key, publish time, sequence id
  common::Slice entry;           // Pulsar's stored entry format (frame.h)
};

// REQUIRES: batch.records is not empty.
ConvertedEntry batch_to_entry(const RecordBatch& batch, int64_t publish_time_ms, const std::string& producer_name,
                              uint64_t sequence_id);

// Appends a stored entry as one record batch whose base offset is
// header.first_index; a compressed Pulsar entry is decompressed first. A
// chunk of a chunked Pulsar message appends nothing and is returned.
// kInvalidArgument/kCorruption for one that does not parse or decompress
// (nothing is appended then).
common::Result<std::optional<pulsar::Chunk>> append_entry_as_batch(const ledger::MessageHeader& header,
                                                                   const common::Slice& entry, WireWriter& out);

}  // namespace magnetar::protocol::kafka
