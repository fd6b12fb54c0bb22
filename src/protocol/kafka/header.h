// Kafka request and response headers, and the size prefix around both.
//
// Every message is size (4, big-endian, bytes after itself) | header | body.
// Request header v1 is apiKey (2) | apiVersion (2) | correlationId (4) |
// clientId (int16-length string, nullable); v2 adds tagged fields. (v0,
// without clientId, is used by no client we serve.) Response header v0 is
// correlationId (4); v1 adds tagged fields.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/bytes.h"
#include "common/result.h"
#include "protocol/kafka/messages.h"
#include "protocol/kafka/wire.h"

namespace magnetar::protocol::kafka {

inline constexpr size_t kSizePrefixBytes = 4;
// The largest request accepted; Kafka's own default (socket.request.max.bytes).
inline constexpr size_t kDefaultMaxRequestBytes = 100 * 1024 * 1024;

struct RequestHeader {
  int16_t api_key = 0;
  int16_t api_version = 0;
  int32_t correlation_id = 0;
  std::optional<std::string> client_id;
};

// Reads the fixed start of a request (key, version, correlation id): enough
// to answer it even when the API or version is not served.
RequestHeader peek_request_header(WireReader& in);
// Reads the rest of the header (client id, and tagged fields from header
// v2) after peek_request_header.
void read_request_header_rest(WireReader& in, RequestHeader* header, int header_version);

// Starts a response: reserves the size prefix and writes the header.
// finish_response patches the size and returns the whole message.
void begin_response(WireWriter& out, int32_t correlation_id, int header_version);
common::Slice finish_response(WireWriter& out);

// Writes a request (for tests and tools): size | header v1/v2 | body.
void begin_request(WireWriter& out, const RequestHeader& header, int header_version);

}  // namespace magnetar::protocol::kafka
