// Content headers and the basic class's message properties.
//
// A content header frame's payload is class-id (2) | weight (2) | body
// size (8) | property flags (2) | the properties whose flags are set, in
// flag order (bit 15 first). Bit 0 of the flags would announce another flags
// word; the basic class has 14 properties and never needs one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/bytes.h"
#include "common/result.h"
#include "protocol/amqp/wire.h"

namespace magnetar::protocol::amqp {

struct BasicProperties {
  std::optional<std::string> content_type;
  std::optional<std::string> content_encoding;
  std::optional<FieldTable> headers;
  std::optional<uint8_t> delivery_mode;  // 1 transient, 2 persistent
  std::optional<uint8_t> priority;
  std::optional<std::string> correlation_id;
  std::optional<std::string> reply_to;
  std::optional<std::string> expiration;  // per-message TTL in ms, as text
  std::optional<std::string> message_id;
  std::optional<uint64_t> timestamp;      // seconds since the epoch
  std::optional<std::string> type;
  std::optional<std::string> user_id;
  std::optional<std::string> app_id;
  std::optional<std::string> cluster_id;  // reserved

  bool operator==(const BasicProperties&) const = default;
};

struct ContentHeader {
  uint16_t class_id = 60;
  uint64_t body_size = 0;
  BasicProperties properties;
  // The flags and properties exactly as received (from the property flags
  // on), so they can be stored and sent back without re-encoding.
  common::Slice raw_properties;
};

// Decodes a content header frame's payload. kInvalidArgument when it is
// truncated, has bytes left over, or sets a continuation flag.
common::Result<ContentHeader> decode_content_header(const common::Slice& payload);
// Decodes flags + properties alone (what raw_properties holds).
common::Result<BasicProperties> decode_properties(const common::Slice& raw);
// Appends flags + properties.
void encode_properties(WireWriter& out, const BasicProperties& p);
// A content header payload of class basic around properties already encoded
// (raw_properties, or encode_properties' bytes).
void encode_content_header(WireWriter& out, uint64_t body_size, std::string_view raw_properties);

}  // namespace magnetar::protocol::amqp
