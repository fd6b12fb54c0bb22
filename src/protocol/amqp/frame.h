// AMQP 0-9-1 frames: the one definition of the framing, for reader and writer.
//
// A connection opens with the 8-byte protocol header "AMQP" 0 0 9 1. Every
// frame after it is type (1) | channel (2) | size (4) | payload (size) |
// frame-end 0xCE. Types: 1 method, 2 content header, 3 content body,
// 8 heartbeat (channel 0, empty). A content header is class-id (2) |
// weight (2, always 0) | body size (8) | property flags and properties
// (properties.h). Integers are big-endian.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/bytes.h"

namespace magnetar::protocol::amqp {

inline constexpr char kProtocolHeader[8] = {'A', 'M', 'Q', 'P', 0, 0, 9, 1};
inline constexpr size_t kProtocolHeaderBytes = 8;
inline constexpr size_t kFrameHeaderBytes = 7;
inline constexpr uint8_t kFrameEnd = 0xCE;
// Type, channel, size and frame-end around a payload.
inline constexpr size_t kFrameOverhead = kFrameHeaderBytes + 1;

// The smallest frame-max a peer may ask for (the spec's frame-min-size).
inline constexpr uint32_t kMinFrameMax = 4096;
// What the server offers in connection.tune: RabbitMQ's default.
inline constexpr uint32_t kDefaultFrameMax = 131072;

enum class FrameType : uint8_t {
  kMethod = 1,
  kHeader = 2,
  kBody = 3,
  kHeartbeat = 8,
};

// One frame cut off the input. `payload` shares the input's buffer unless
// the frame arrived split across reads.
struct Frame {
  FrameType type = FrameType::kMethod;
  uint16_t channel = 0;
  common::Slice payload;
};

enum class DecodeResult {
  kNeedMore,   // no whole frame at the front of the input; nothing consumed
  kFrame,      // one frame consumed
  kTooLarge,   // the size field exceeds frame_max: a connection error (501)
  kBadFrame,   // unknown type or a missing frame-end: a connection error (501)
};

// Cuts one frame off the front of `input`. `frame_max` counts the whole
// frame (header, payload and frame-end), as frame-max does in tune.
DecodeResult decode_frame(common::SliceChain& input, uint32_t frame_max, Frame* out);

// A whole frame around `payload`.
common::Slice encode_frame(FrameType type, uint16_t channel, std::string_view payload);
// Appends a frame's header for a payload of `size` bytes (the caller appends
// the payload and then kFrameEnd).
void put_frame_header(common::BufferWriter& out, FrameType type, uint16_t channel, uint32_t size);
common::Slice heartbeat_frame();

}  // namespace magnetar::protocol::amqp
