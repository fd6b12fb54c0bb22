#include "protocol/kafka/wire.h"

#include <fmt/format.h>

namespace magnetar::protocol::kafka {

using common::Slice;
using common::Status;

void WireReader::fail(std::string why) {
  if (status_.is_ok()) status_ = Status::invalid_argument(fmt::format("{} at byte {}", why, pos_));
}

bool WireReader::need(size_t n) {
  if (!status_.is_ok()) return false;
  if (in_.size() - pos_ < n) {
    fail(fmt::format("truncated: {} bytes needed, {} left", n, in_.size() - pos_));
    return false;
  }
  return true;
}

int8_t WireReader::i8() {
  if (!need(1)) return 0;
  return static_cast<int8_t>(in_.data()[pos_++]);
}

int16_t WireReader::i16() {
  if (!need(2)) return 0;
  const uint8_t* p = in_.data() + pos_;
  pos_ += 2;
  return static_cast<int16_t>((uint16_t{p[0]} << 8) | p[1]);
}

int32_t WireReader::i32() {
  if (!need(4)) return 0;
  const uint8_t* p = in_.data() + pos_;
  pos_ += 4;
  return static_cast<int32_t>((uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3]);
}

int64_t WireReader::i64() {
  uint64_t hi = static_cast<uint32_t>(i32());
  uint64_t lo = static_cast<uint32_t>(i32());
  return static_cast<int64_t>((hi << 32) | lo);
}

uint64_t WireReader::uvarlong() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (!need(1)) return 0;
    uint8_t b = in_.data()[pos_++];
    v |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) return v;
  }
  fail("varint longer than 10 bytes");
  return 0;
}

uint32_t WireReader::uvarint() {
  uint64_t v = uvarlong();
  if (v > UINT32_MAX) {
    fail("varint out of range");
    return 0;
  }
  return static_cast<uint32_t>(v);
}

int32_t WireReader::varint() {
  uint32_t u = uvarint();
  return static_cast<int32_t>((u >> 1) ^ (~(u & 1) + 1));
}

int64_t WireReader::varlong() {
  uint64_t u = uvarlong();
  return static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
}

std::optional<std::string> WireReader::string(bool compact) {
  int64_t len = compact ? static_cast<int64_t>(uvarint()) - 1 : i16();
  if (!ok() || len < 0) return std::nullopt;
  if (!need(static_cast<size_t>(len))) return std::nullopt;
  std::string s(reinterpret_cast<const char*>(in_.data() + pos_), static_cast<size_t>(len));
  pos_ += static_cast<size_t>(len);
  return s;
}

std::optional<Slice> WireReader::bytes(bool compact) {
  int64_t len = compact ? static_cast<int64_t>(uvarint()) - 1 : i32();
  if (!ok() || len < 0) return std::nullopt;
  return raw(static_cast<size_t>(len));
}

Slice WireReader::raw(size_t n) {
  if (!need(n)) return {};
  Slice s = in_.sub(pos_, n);
  pos_ += n;
  return s;
}

int32_t WireReader::array_length(bool compact) {
  int64_t n = compact ? static_cast<int64_t>(uvarint()) - 1 : i32();
  if (!ok()) return -1;
  if (n < -1) {
    fail("negative array length");
    return -1;
  }
  if (n > 0 && static_cast<size_t>(n) > remaining()) {
    fail(fmt::format("array of {} elements in {} bytes", n, remaining()));
    return -1;
  }
  return static_cast<int32_t>(n);
}

void WireReader::skip_tagged_fields() {
  uint32_t count = uvarint();
  for (uint32_t i = 0; i < count && ok(); ++i) {
    uvarint();  // tag
    uint32_t size = uvarint();
    raw(size);
  }
}

void WireWriter::uvarint(uint64_t v) {
  while (v >= 0x80) {
    out_.put_u8(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out_.put_u8(static_cast<uint8_t>(v));
}

void WireWriter::varint(int64_t v) {
  uvarint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
}

void WireWriter::string(const std::optional<std::string_view>& s, bool compact) {
  if (compact) {
    uvarint(s ? s->size() + 1 : 0);
  } else {
    i16(s ? static_cast<int16_t>(s->size()) : int16_t{-1});
  }
  if (s) raw(*s);
}

void WireWriter::bytes(const std::optional<std::string_view>& b, bool compact) {
  if (compact) {
    uvarint(b ? b->size() + 1 : 0);
  } else {
    i32(b ? static_cast<int32_t>(b->size()) : -1);
  }
  if (b) raw(*b);
}

void WireWriter::array_length(int32_t n, bool compact) {
  if (compact) {
    uvarint(n < 0 ? 0 : static_cast<uint64_t>(n) + 1);
  } else {
    i32(n);
  }
}

size_t uvarint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

size_t varint_size(int64_t v) {
  return uvarint_size((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
}

}  // namespace magnetar::protocol::kafka
