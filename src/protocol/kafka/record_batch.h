// Kafka record batches (message format v2, magic 2): the one reader and
// writer of the format.
//
// Batch is baseOffset (8) | batchLength (4, bytes after itself) |
// partitionLeaderEpoch (4) | magic (1) | crc (4, CRC32C of every byte after
// it) | attributes (2) | lastOffsetDelta (4) | baseTimestamp (8) |
// maxTimestamp (8) | producerId (8) | producerEpoch (2) | baseSequence (4) |
// record count (4) | records. A record is length (varint) | attributes (1) |
// timestampDelta (varlong) | offsetDelta (varint) | key (varint length, -1 =
// null) | value (same) | header count (varint) | headers (key: varint length
// + bytes; value: varint length, -1 = null, + bytes). Integers are
// big-endian; varints zigzag.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "common/result.h"
#include "protocol/kafka/wire.h"

namespace magnetar::protocol::kafka {

inline constexpr size_t kBatchHeaderBytes = 61;  // through the record count
inline constexpr int8_t kMagicV2 = 2;

enum class Compression : int8_t { kNone = 0, kGzip = 1, kSnappy = 2, kLz4 = 3, kZstd = 4 };

struct RecordHeader {
  std::string key;
  std::optional<common::Slice> value;
};

struct Record {
  int64_t timestamp = 0;  // absolute (baseTimestamp + delta)
  int32_t offset_delta = 0;
  std::optional<common::Slice> key;
  std::optional<common::Slice> value;
  std::vector<RecordHeader> headers;
};

struct RecordBatch {
  int64_t base_offset = 0;
  int32_t partition_leader_epoch = -1;
  int16_t attributes = 0;
  int64_t base_timestamp = 0;
  int64_t max_timestamp = 0;
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  int32_t base_sequence = -1;
  // Offsets the batch covers past its first, when more than its records
  // take (the offsets of messages left out); -1: the last record's delta.
  int32_t last_offset_delta = -1;
  std::vector<Record> records;

  Compression compression() const { return static_cast<Compression>(attributes & 0x7); }
  bool transactional() const { return (attributes & 0x10) != 0; }
  bool control() const { return (attributes & 0x20) != 0; }
};

// Parses every batch of a record set (the Records bytes of a Produce
// partition). Errors, all kInvalidArgument with the reason: not magic 2, a
// CRC32C mismatch, compressed records that do not decode (compression.h),
// a record that does not fit its batch. Records share `records`' buffer, or
// the decompressed copy of a compressed batch's records.
common::Result<std::vector<RecordBatch>> parse_record_set(const common::Slice& records);

// Appends one batch: batchLength and crc are computed, lastOffsetDelta is
// last_offset_delta when set, else the last record's offset delta (0 for
// none). Always uncompressed.
void write_record_batch(WireWriter& out, const RecordBatch& batch);

// Appends a control batch spanning offsets [base_offset, last_offset] that
// holds one COMMIT marker (control record key: version 0, type 1; value:
// version 0, coordinator epoch 0) at last_offset, producer id -1.
// Consumers hand no record of it to the application and fetch on after
// last_offset, as past a transaction marker: how offsets that hold nothing
// a Kafka client can read are skipped without the client asking for them
// again. REQUIRES: base_offset <= last_offset.
void write_skip_batch(WireWriter& out, int64_t base_offset, int64_t last_offset, int64_t timestamp_ms);

}  // namespace magnetar::protocol::kafka
