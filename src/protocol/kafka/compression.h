// Record batch compression as Kafka clients write it: the records section
// of a batch (everything after the record count) is compressed as a whole.
// gzip is a gzip stream (RFC 1952; a zlib stream is accepted too), snappy is
// either raw Snappy or Snappy's "xerial" framing (8-byte magic, version and
// compatibility words, then length-prefixed raw blocks), lz4 is the LZ4
// frame format, zstd a Zstandard frame.
#pragma once

#include <cstddef>

#include "common/bytes.h"
#include "common/result.h"
#include "protocol/kafka/record_batch.h"

namespace magnetar::protocol::kafka {

// The largest records section a compressed batch may expand to.
inline constexpr size_t kMaxDecompressedBytes = 128u << 20;

// Decompresses a batch's records section. kInvalidArgument when the bytes do
// not decode or expand past `max_size`; kUnimplemented for an unknown codec.
common::Result<common::Slice> decompress_records(Compression codec, const common::Slice& input,
                                                 size_t max_size = kMaxDecompressedBytes);

}  // namespace magnetar::protocol::kafka
