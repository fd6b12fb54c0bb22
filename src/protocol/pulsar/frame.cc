#include "protocol/pulsar/frame.h"

#include <fmt/format.h>

#include <bitset>
#include <cassert>
#include <climits>

#include "common/crc32c.h"

namespace magnetar::protocol::pulsar {

namespace {

using common::load_u32_be;
using common::Slice;
using common::Status;

uint16_t load_u16_be(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }

bool read_varint(const uint8_t*& p, const uint8_t* end, uint64_t* out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (p == end) return false;
    uint8_t b = *p++;
    v |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) {
      *out = v;
      return true;
    }
  }
  return false;
}

// What a serialized BaseCommand says at its top level, read without protobuf:
// the type number as sent (also one this schema does not know) and which
// length-delimited fields (sub-commands) occur.
struct CommandOutline {
  int64_t type = 0;
  std::bitset<128> bodies;
};

bool outline_command(const uint8_t* p, size_t n, CommandOutline* out) {
  const uint8_t* end = p + n;
  while (p < end) {
    uint64_t key;
    if (!read_varint(p, end, &key)) return false;
    uint64_t field = key >> 3;
    uint64_t v;
    switch (key & 7) {
      case 0:
        if (!read_varint(p, end, &v)) return false;
        if (field == 1) out->type = static_cast<int64_t>(v);
        break;
      case 1:
        if (end - p < 8) return false;
        p += 8;
        break;
      case 2:
        if (!read_varint(p, end, &v) || v > static_cast<uint64_t>(end - p)) return false;
        p += v;
        if (field < out->bodies.size()) out->bodies.set(field);
        break;
      case 5:
        if (end - p < 4) return false;
        p += 4;
        break;
      default:
        return false;
    }
  }
  return true;
}

bool is_payload_type(proto::BaseCommand::Type type) {
  return type == proto::BaseCommand::SEND || type == proto::BaseCommand::MESSAGE;
}

// Commands whose body has no fields; some clients send only the type.
bool body_may_be_absent(proto::BaseCommand::Type type) {
  return type == proto::BaseCommand::PING || type == proto::BaseCommand::PONG;
}

// Checks the two size fields against each other and the limit. `command_size`
// is null while its bytes have not arrived.
Status check_sizes(uint32_t total_size, const uint32_t* command_size, const FrameLimits& limits) {
  if (size_t{total_size} + kSizeFieldBytes > limits.max_frame_size || total_size > INT_MAX - kSizeFieldBytes) {
    return Status::invalid_argument(fmt::format("frame of {} bytes exceeds the limit of {} bytes",
                                                size_t{total_size} + kSizeFieldBytes, limits.max_frame_size));
  }
  if (total_size < kSizeFieldBytes) {
    return Status::invalid_argument(
        fmt::format("frame size {} cannot hold the 4-byte command size", total_size));
  }
  if (command_size != nullptr && *command_size > total_size - kSizeFieldBytes) {
    return Status::invalid_argument(fmt::format("command size {} exceeds the {} bytes the frame has left",
                                                *command_size, total_size - kSizeFieldBytes));
  }
  return Status::ok();
}

std::string type_name(int64_t wire_type) {
  if (proto::BaseCommand::Type_IsValid(static_cast<int>(wire_type))) {
    return proto::BaseCommand::Type_Name(static_cast<proto::BaseCommand::Type>(wire_type));
  }
  return fmt::format("type {}", wire_type);
}

void put_message(common::BufferWriter& w, const google::protobuf::MessageLite& m, size_t size) {
  if (size == 0) return;
  size_t at = w.skip(size);
  m.SerializeWithCachedSizesToArray(w.at(at));
}

// Writes 0x0e01 | CRC32C | metadataSize | metadata | payload.
void write_entry(common::BufferWriter& w, const proto::MessageMetadata& metadata, size_t metadata_size,
                 std::string_view payload) {
  w.put_u16_be(kChecksumMagic);
  size_t checksum_at = w.skip(kChecksumBytes);
  size_t covered_from = w.size();
  w.put_u32_be(static_cast<uint32_t>(metadata_size));
  put_message(w, metadata, metadata_size);
  w.append(payload);
  w.patch_u32_be(checksum_at, common::crc32c::value(w.at(covered_from), w.size() - covered_from));
}

size_t entry_size(size_t metadata_size, size_t payload_size) {
  return kMagicBytes + kChecksumBytes + kSizeFieldBytes + metadata_size + payload_size;
}

// Writes totalSize | commandSize | command [| 0x0e02 | size | metadata] for a
// frame whose remaining `tail_size` bytes the caller writes next.
void write_head(common::BufferWriter& w, const proto::BaseCommand& command, size_t command_size,
                const proto::BrokerEntryMetadata* bem, size_t bem_size, size_t tail_size) {
  size_t total = kSizeFieldBytes + command_size + tail_size;
  if (bem != nullptr) total += kMagicBytes + kSizeFieldBytes + bem_size;
  assert(total <= UINT32_MAX);
  w.put_u32_be(static_cast<uint32_t>(total));
  w.put_u32_be(static_cast<uint32_t>(command_size));
  put_message(w, command, command_size);
  if (bem != nullptr) {
    w.put_u16_be(kBrokerEntryMetadataMagic);
    w.put_u32_be(static_cast<uint32_t>(bem_size));
    put_message(w, *bem, bem_size);
  }
}

}  // namespace

// Protobuf's ParseFromArray would log every message missing a required field:
// what a peer sends must not be able to flood the log.
bool parse_whole(const uint8_t* data, size_t size, google::protobuf::MessageLite* message) {
  return size <= INT_MAX && message->ParsePartialFromArray(data, static_cast<int>(size)) &&
         message->IsInitialized();
}

void Frame::clear() {
  command.Clear();
  wire_type = 0;
  has_payload = false;
  has_broker_entry_metadata = false;
  broker_entry_metadata.Clear();
  has_checksum = false;
  metadata.Clear();
  entry = Slice();
  payload = Slice();
}

Status parse_entry(const Slice& entry, bool verify_checksum, proto::MessageMetadata* metadata,
                   Slice* payload, bool* has_checksum) {
  const uint8_t* p = entry.data();
  const size_t n = entry.size();
  size_t off = 0;
  bool checksummed = false;
  if (n >= kMagicBytes && load_u16_be(p) == kChecksumMagic) {
    if (n < kMagicBytes + kChecksumBytes) return Status::invalid_argument("entry ends inside its checksum");
    off = kMagicBytes + kChecksumBytes;
    checksummed = true;
    if (verify_checksum) {
      uint32_t expected = load_u32_be(p + kMagicBytes);
      uint32_t actual = common::crc32c::value(p + off, n - off);
      if (actual != expected) {
        return Status::corruption(fmt::format(
            "checksum mismatch: the frame says {:#010x}, its metadata and payload give {:#010x}", expected,
            actual));
      }
    }
  }
  if (has_checksum != nullptr) *has_checksum = checksummed;
  if (n - off < kSizeFieldBytes) return Status::invalid_argument("entry ends before its metadata size");
  uint32_t metadata_size = load_u32_be(p + off);
  off += kSizeFieldBytes;
  if (metadata_size > n - off) {
    return Status::invalid_argument(
        fmt::format("metadata size {} exceeds the {} bytes the entry has left", metadata_size, n - off));
  }
  if (metadata_size > INT_MAX || !parse_whole(p + off, metadata_size, metadata)) {
    return Status::invalid_argument("message metadata is not a valid MessageMetadata");
  }
  off += metadata_size;
  *payload = entry.sub(off);
  return Status::ok();
}

DecodeResult decode_frame(const Slice& frame, const FrameLimits& limits, Frame* out, Status* why) {
  out->clear();
  const uint8_t* base = frame.data();
  const size_t n = frame.size();
  if (n < kSizeFieldBytes) return DecodeResult::kNeedMore;
  uint32_t total = load_u32_be(base);
  if (Status st = check_sizes(total, nullptr, limits); !st) {
    *why = std::move(st);
    return DecodeResult::kStreamError;
  }
  if (n < kSizeFieldBytes + total) return DecodeResult::kNeedMore;
  if (n > kSizeFieldBytes + total) {
    *why = Status::invalid_argument(fmt::format("{} bytes follow the end of the frame", n - kSizeFieldBytes - total));
    return DecodeResult::kStreamError;
  }
  uint32_t command_size = load_u32_be(base + kSizeFieldBytes);
  if (Status st = check_sizes(total, &command_size, limits); !st) {
    *why = std::move(st);
    return DecodeResult::kStreamError;
  }

  // The command.
  const uint8_t* command = base + 2 * kSizeFieldBytes;
  CommandOutline outline;
  if (!outline_command(command, command_size, &outline) ||
      !out->command.ParsePartialFromArray(command, static_cast<int>(command_size))) {
    *why = Status::invalid_argument("command is not a valid BaseCommand");
    return DecodeResult::kMalformedFrame;
  }
  out->wire_type = out->command.has_type() ? out->command.type() : static_cast<int32_t>(outline.type);
  if (!out->command.has_type()) {
    *why = outline.type == 0 ? Status::invalid_argument("command has no type")
                             : Status::unimplemented(fmt::format("unknown command type {}", outline.type));
    return DecodeResult::kMalformedFrame;
  }
  const auto type = out->command.type();
  if (!body_may_be_absent(type) && !outline.bodies.test(static_cast<size_t>(type))) {
    *why = Status::invalid_argument(fmt::format("{} command carries no body", type_name(type)));
    return DecodeResult::kMalformedFrame;
  }
  if (!out->command.IsInitialized()) {
    *why = Status::invalid_argument(fmt::format("{} command misses required fields", type_name(type)));
    return DecodeResult::kMalformedFrame;
  }

  // The payload section, if any.
  size_t off = 2 * kSizeFieldBytes + command_size;
  const size_t rest = n - off;
  if (!is_payload_type(type)) {
    if (rest == 0) return DecodeResult::kFrame;
    *why = Status::invalid_argument(fmt::format("{} bytes follow a {} command, which carries no payload", rest,
                                                type_name(type)));
    return DecodeResult::kMalformedFrame;
  }
  if (rest == 0) {
    *why = Status::invalid_argument(fmt::format("{} frame carries no metadata and payload", type_name(type)));
    return DecodeResult::kMalformedFrame;
  }
  out->has_payload = true;
  if (rest >= kMagicBytes && load_u16_be(base + off) == kBrokerEntryMetadataMagic) {
    if (rest < kMagicBytes + kSizeFieldBytes) {
      *why = Status::invalid_argument("frame ends inside the broker entry metadata size");
      return DecodeResult::kMalformedFrame;
    }
    uint32_t bem_size = load_u32_be(base + off + kMagicBytes);
    off += kMagicBytes + kSizeFieldBytes;
    if (bem_size > n - off ||
        !parse_whole(base + off, bem_size, &out->broker_entry_metadata)) {
      *why = Status::invalid_argument(fmt::format("broker entry metadata of {} bytes is invalid", bem_size));
      return DecodeResult::kMalformedFrame;
    }
    out->has_broker_entry_metadata = true;
    off += bem_size;
  }
  Slice entry = frame.sub(off);
  Status st = parse_entry(entry, limits.verify_checksum, &out->metadata, &out->payload, &out->has_checksum);
  if (!st) {
    const bool checksum = st.code() == common::ErrorCode::kCorruption;
    *why = std::move(st);
    return checksum ? DecodeResult::kChecksumMismatch : DecodeResult::kMalformedFrame;
  }
  out->entry = std::move(entry);
  return DecodeResult::kFrame;
}

DecodeResult FrameDecoder::decode(common::SliceChain& input, Frame* out) {
  if (broken_) return DecodeResult::kStreamError;
  if (input.size() < kSizeFieldBytes) return DecodeResult::kNeedMore;
  uint8_t head[2 * kSizeFieldBytes];
  const bool have_command_size = input.size() >= sizeof(head);
  input.copy_out(head, have_command_size ? sizeof(head) : kSizeFieldBytes);
  const uint32_t total = load_u32_be(head);
  const uint32_t command_size = load_u32_be(head + kSizeFieldBytes);
  // Reject impossible sizes as soon as they arrive, not after the bytes they promise.
  if (Status st = check_sizes(total, have_command_size ? &command_size : nullptr, limits_); !st) {
    status_ = std::move(st);
    broken_ = true;
    return DecodeResult::kStreamError;
  }
  if (input.size() < kSizeFieldBytes + total) return DecodeResult::kNeedMore;
  Slice frame = input.take_front(kSizeFieldBytes + total);
  DecodeResult r = decode_frame(frame, limits_, out, &status_);
  if (r == DecodeResult::kStreamError) broken_ = true;
  return r;
}

Slice encode_command(const proto::BaseCommand& command) {
  const size_t command_size = command.ByteSizeLong();
  common::BufferWriter w(2 * kSizeFieldBytes + command_size);
  write_head(w, command, command_size, nullptr, 0, 0);
  return w.finish();
}

Slice encode_entry(const proto::MessageMetadata& metadata, std::string_view payload) {
  const size_t metadata_size = metadata.ByteSizeLong();
  common::BufferWriter w(entry_size(metadata_size, payload.size()));
  write_entry(w, metadata, metadata_size, payload);
  return w.finish();
}

Slice encode_payload_command(const proto::BaseCommand& command, const proto::MessageMetadata& metadata,
                             std::string_view payload, const proto::BrokerEntryMetadata* broker_entry_metadata) {
  const size_t command_size = command.ByteSizeLong();
  const size_t bem_size = broker_entry_metadata ? broker_entry_metadata->ByteSizeLong() : 0;
  const size_t metadata_size = metadata.ByteSizeLong();
  const size_t tail = entry_size(metadata_size, payload.size());
  common::BufferWriter w(3 * kSizeFieldBytes + command_size + kMagicBytes + bem_size + tail);
  write_head(w, command, command_size, broker_entry_metadata, bem_size, tail);
  write_entry(w, metadata, metadata_size, payload);
  return w.finish();
}

Slice encode_payload_head(const proto::BaseCommand& command, size_t entry_size,
                          const proto::BrokerEntryMetadata* broker_entry_metadata) {
  const size_t command_size = command.ByteSizeLong();
  const size_t bem_size = broker_entry_metadata ? broker_entry_metadata->ByteSizeLong() : 0;
  common::BufferWriter w(3 * kSizeFieldBytes + command_size + kMagicBytes + bem_size);
  write_head(w, command, command_size, broker_entry_metadata, bem_size, entry_size);
  return w.finish();
}

}  // namespace magnetar::protocol::pulsar
