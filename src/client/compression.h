// Message compression as Pulsar clients do it.
//
// A producer compresses an entry's payload (one message, or a whole batch)
// and sets MessageMetadata.compression and .uncompressed_size; a consumer
// reverses it before splitting the batch. The broker stores and forwards the
// compressed bytes untouched. The formats are the plain ones each library
// writes: LZ4 block format (no frame header; the size comes from the
// metadata), ZLIB's zlib stream (RFC 1950), a ZSTD frame and raw Snappy.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "common/bytes.h"
#include "common/result.h"
#include "protocol/pulsar/pulsar_api.pb.h"

namespace magnetar::client {

using CompressionType = protocol::pulsar::proto::CompressionType;

// "none", "lz4", "zlib", "zstd", "snappy" (any case); nullopt otherwise.
std::optional<CompressionType> parse_compression(std::string_view name);
const char* compression_name(CompressionType type);

// Compresses `input` with `type` (NONE copies it).
common::Result<common::Slice> compress(CompressionType type, std::string_view input);

// Decompresses `input` that held `uncompressed_size` bytes before. Fails with
// kCorruption when the bytes do not decode to exactly that size, and
// kInvalidArgument for an unknown type.
common::Result<common::Slice> decompress(CompressionType type, const common::Slice& input, size_t uncompressed_size);

// Parses a stored entry (protocol/pulsar/frame.h, checksum not verified)
// and decompresses its payload when its metadata says it is compressed: what
// the protocols that convert messages (Kafka, AMQP) read. A chunk's payload
// (pulsar::chunk_of) is a piece of the message and stays as stored.
common::Status parse_plain_entry(const common::Slice& entry, protocol::pulsar::proto::MessageMetadata* metadata,
                                 common::Slice* payload);

}  // namespace magnetar::client
