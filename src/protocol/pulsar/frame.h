// Pulsar frames: the one definition of the wire format, for reader and writer.
//
// Frame is totalSize (4) | commandSize (4) | BaseCommand; a payload frame (SEND,
// MESSAGE) continues with [0x0e02 (2) | size (4) | BrokerEntryMetadata]
// [0x0e01 (2) | CRC32C (4)] metadataSize (4) | MessageMetadata | payload.
//
// Integers are big-endian. totalSize counts every byte after itself. Both
// bracketed parts are optional: the broker adds broker entry metadata for
// clients that asked for it, and clients older than protocol v6 send no
// checksum. The CRC32C covers every byte after itself. The part from the
// 0x0e01 magic to the end is an *entry*: what the broker stores and sends back
// unchanged, so dispatching a message copies no message bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/bytes.h"
#include "common/status.h"
#include "protocol/pulsar/pulsar_api.pb.h"

namespace magnetar::protocol::pulsar {

inline constexpr size_t kSizeFieldBytes = 4;
inline constexpr size_t kMagicBytes = 2;
inline constexpr size_t kChecksumBytes = 4;
inline constexpr uint16_t kChecksumMagic = 0x0e01;
inline constexpr uint16_t kBrokerEntryMetadataMagic = 0x0e02;

// Pulsar's default largest message (maxMessageSize), and the room a frame may
// take beyond it for the command and metadata around the payload.
inline constexpr size_t kDefaultMaxMessageSize = 5 * 1024 * 1024;
inline constexpr size_t kFramePadding = 10 * 1024;

struct FrameLimits {
  // Largest whole frame accepted, counting the totalSize field itself. Frames
  // over 2 GiB are refused whatever this says.
  size_t max_frame_size = kDefaultMaxMessageSize + kFramePadding;
  // Whether CRC32C checksums are checked when present.
  bool verify_checksum = true;
};

// One decoded frame. The slices share the input's buffer: holding them keeps
// that buffer alive, and no message bytes were copied to make them (unless the
// frame arrived split across reads, when it was gathered once).
struct Frame {
  proto::BaseCommand command;
  // The type number as sent, also when it is one this schema does not know
  // (then command.has_type() is false). 0 when the frame had none.
  int32_t wire_type = 0;

  // Everything below is set only for payload frames (SEND, MESSAGE).
  bool has_payload = false;
  bool has_broker_entry_metadata = false;
  proto::BrokerEntryMetadata broker_entry_metadata;
  bool has_checksum = false;  // false: the sender predates checksums
  proto::MessageMetadata metadata;
  common::Slice entry;    // from the checksum magic (or metadataSize) to the end
  common::Slice payload;  // after the metadata: a message or a batch (batch.h)

  // Resets every field, keeping protobuf allocations for reuse.
  void clear();
};

enum class DecodeResult {
  kNeedMore,          // no whole frame at the front of the input; nothing consumed
  kFrame,             // one frame consumed and valid
  kChecksumMismatch,  // one frame consumed; its command is valid but metadata and
                      // payload failed CRC32C: answer SEND_ERROR ChecksumError,
                      // never store or deliver them
  kMalformedFrame,    // one frame consumed whose content is invalid (unknown type,
                      // missing fields, bad payload section); the stream is still
                      // in step. `command` holds what could be parsed.
  kStreamError,       // the framing itself is broken (oversize, impossible sizes):
                      // the stream cannot be resynchronised; close the connection
};

// Cuts frames off the front of a connection's input. One decoder per
// connection, used on that connection's reactor thread only.
class FrameDecoder {
 public:
  explicit FrameDecoder(FrameLimits limits = {}) : limits_(limits) {}

  // Decodes at most one frame from the front of `input`. For every result but
  // kNeedMore and kStreamError it consumes the frame's bytes and refills
  // `*out` (cleared first). After kStreamError every later call returns it
  // again and consumes nothing.
  DecodeResult decode(common::SliceChain& input, Frame* out);

  // The reason for the most recent kChecksumMismatch, kMalformedFrame or
  // kStreamError; left as it was by kFrame and kNeedMore.
  const common::Status& status() const { return status_; }
  const FrameLimits& limits() const { return limits_; }

 private:
  const FrameLimits limits_;
  common::Status status_;
  bool broken_ = false;
};

// Decodes one whole frame held in `frame` (starting with totalSize). Returns
// kNeedMore when `frame` is shorter than its totalSize says; bytes past the
// frame's end are a kStreamError. `*why` is set for the error results.
DecodeResult decode_frame(const common::Slice& frame, const FrameLimits& limits, Frame* out,
                          common::Status* why);

// Parses a stored entry (see above): checks its checksum when present and
// `verify_checksum`, parses the metadata, and points `*payload` into `entry`.
// Errors: kCorruption for a checksum mismatch, kInvalidArgument otherwise.
common::Status parse_entry(const common::Slice& entry, bool verify_checksum,
                           proto::MessageMetadata* metadata, common::Slice* payload,
                           bool* has_checksum = nullptr);

// Parses `size` bytes into `message` and checks its required fields; false
// when they are not a valid message. Quiet: never logs.
bool parse_whole(const uint8_t* data, size_t size, google::protobuf::MessageLite* message);

// --- Encoding. Each function writes whole frames; REQUIRES: the messages have
// --- their required fields set and the frame fits in 4 GiB.

// A frame without payload: PING, CONNECTED, SEND_RECEIPT, ...
common::Slice encode_command(const proto::BaseCommand& command);

// An entry: 0x0e01 | CRC32C | metadataSize | metadata | payload.
common::Slice encode_entry(const proto::MessageMetadata& metadata, std::string_view payload);

// A whole payload frame (SEND from a client, or MESSAGE) in one buffer.
common::Slice encode_payload_command(const proto::BaseCommand& command,
                                     const proto::MessageMetadata& metadata,
                                     std::string_view payload,
                                     const proto::BrokerEntryMetadata* broker_entry_metadata = nullptr);

// The head of a payload frame whose entry (encode_entry's bytes, e.g. as read
// from storage) is written after it unchanged, with writev: sizes, command and
// optional broker entry metadata. The frame is head + entry.
common::Slice encode_payload_head(const proto::BaseCommand& command, size_t entry_size,
                                  const proto::BrokerEntryMetadata* broker_entry_metadata = nullptr);

}  // namespace magnetar::protocol::pulsar
