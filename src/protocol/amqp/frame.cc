#include "protocol/amqp/frame.h"

namespace magnetar::protocol::amqp {

using common::Slice;

DecodeResult decode_frame(common::SliceChain& input, uint32_t frame_max, Frame* out) {
  if (input.size() < kFrameHeaderBytes) return DecodeResult::kNeedMore;
  uint8_t head[kFrameHeaderBytes];
  input.copy_out(head, sizeof head);
  const uint8_t type = head[0];
  if (type != 1 && type != 2 && type != 3 && type != 8) return DecodeResult::kBadFrame;
  const uint32_t size = (uint32_t{head[3]} << 24) | (uint32_t{head[4]} << 16) | (uint32_t{head[5]} << 8) | head[6];
  if (uint64_t{size} + kFrameOverhead > frame_max) return DecodeResult::kTooLarge;
  if (input.size() < kFrameOverhead + size) return DecodeResult::kNeedMore;
  input.consume(kFrameHeaderBytes);
  Slice payload = input.take_front(size);
  uint8_t end = 0;
  input.copy_out(&end, 1);
  if (end != kFrameEnd) return DecodeResult::kBadFrame;
  input.consume(1);
  out->type = static_cast<FrameType>(type);
  out->channel = static_cast<uint16_t>((head[1] << 8) | head[2]);
  out->payload = std::move(payload);
  return DecodeResult::kFrame;
}

void put_frame_header(common::BufferWriter& out, FrameType type, uint16_t channel, uint32_t size) {
  out.put_u8(static_cast<uint8_t>(type));
  out.put_u16_be(channel);
  out.put_u32_be(size);
}

Slice encode_frame(FrameType type, uint16_t channel, std::string_view payload) {
  common::BufferWriter out(payload.size() + kFrameOverhead);
  put_frame_header(out, type, channel, static_cast<uint32_t>(payload.size()));
  out.append(payload);
  out.put_u8(kFrameEnd);
  return out.finish();
}

Slice heartbeat_frame() { return encode_frame(FrameType::kHeartbeat, 0, {}); }

}  // namespace magnetar::protocol::amqp
