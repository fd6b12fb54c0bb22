// How topic compaction reads and rewrites stored entries (Pulsar's wire
// format; broker/compaction.h CompactionCodec).
//
// A message's key is its partition key (Pulsar's message key, Kafka's record
// key); a tombstone is a keyed message with null_value set or an empty
// payload (a Kafka record with an empty, non-null value counts as one too).
// A rewritten batch keeps every message's metadata and place, sets
// compacted_out on the removed ones and drops their values, as Pulsar's own
// compactor does, and is stored uncompressed.
#pragma once

#include "broker/compaction.h"

namespace magnetar::protocol::pulsar {

class PulsarCompactionCodec final : public broker::CompactionCodec {
 public:
  common::Result<std::vector<broker::CompactionMessage>> messages(const common::Slice& payload) const override;
  common::Result<common::Slice> keep_only(const common::Slice& payload, const std::vector<bool>& keep) const override;
};

}  // namespace magnetar::protocol::pulsar
