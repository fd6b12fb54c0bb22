#include "protocol/amqp/wire.h"

#include <cstring>

#include <fmt/format.h>

namespace magnetar::protocol::amqp {

using common::Slice;

namespace {

// Tables nested deeper than any client sends are refused rather than
// recursed into.
constexpr int kMaxDepth = 16;

double bits_to_double(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

float bits_to_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

FieldValue FieldValue::of_string(std::string v) {
  FieldValue f;
  f.type = 'S';
  f.s = std::move(v);
  return f;
}

FieldValue FieldValue::of_int(int64_t v) {
  FieldValue f;
  f.type = 'l';
  f.i = v;
  return f;
}

FieldValue FieldValue::of_bool(bool v) {
  FieldValue f;
  f.type = 't';
  f.i = v ? 1 : 0;
  return f;
}

bool FieldValue::is_integer() const {
  switch (type) {
    case 't': case 'b': case 'B': case 's': case 'u': case 'I': case 'i': case 'l': case 'T': return true;
    default: return false;
  }
}

std::string FieldValue::to_text() const {
  if (type == 't') return i != 0 ? "true" : "false";
  if (is_integer()) return std::to_string(i);
  switch (type) {
    case 'S': case 'x': return s;
    case 'f': case 'd': return fmt::format("{}", d);
    case 'D': return fmt::format("{}e-{}", i, scale);
    default: return {};
  }
}

bool FieldValue::operator==(const FieldValue& o) const {
  return type == o.type && i == o.i && (d == o.d || (d != d && o.d != o.d)) && scale == o.scale && s == o.s &&
         table == o.table && array == o.array;
}

const FieldValue* find_field(const FieldTable& t, std::string_view name) {
  for (const auto& e : t) {
    if (e.name == name) return &e.value;
  }
  return nullptr;
}

// --- WireReader.

void WireReader::fail(std::string why) {
  if (status_.is_ok()) status_ = common::Status::invalid_argument(std::move(why));
  pos_ = in_.size();
}

bool WireReader::need(size_t n) {
  if (!ok()) return false;
  if (remaining() < n) {
    fail(fmt::format("truncated: {} bytes needed at offset {}, {} left", n, pos_, remaining()));
    return false;
  }
  return true;
}

uint8_t WireReader::u8() {
  if (!need(1)) return 0;
  return in_.data()[pos_++];
}

uint16_t WireReader::u16() {
  if (!need(2)) return 0;
  const uint8_t* p = in_.data() + pos_;
  pos_ += 2;
  return static_cast<uint16_t>((p[0] << 8) | p[1]);
}

uint32_t WireReader::u32() {
  if (!need(4)) return 0;
  const uint8_t* p = in_.data() + pos_;
  pos_ += 4;
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

uint64_t WireReader::u64() {
  uint64_t hi = u32();
  uint64_t lo = u32();
  return (hi << 32) | lo;
}

Slice WireReader::raw(size_t n) {
  if (!need(n)) return {};
  Slice s = in_.sub(pos_, n);
  pos_ += n;
  return s;
}

std::string WireReader::shortstr() {
  size_t n = u8();
  return raw(n).to_string();
}

std::string WireReader::longstr() { return longstr_slice().to_string(); }

Slice WireReader::longstr_slice() {
  uint32_t n = u32();
  return raw(n);
}

FieldTable WireReader::table() { return table_at(0); }

FieldTable WireReader::table_at(int depth) {
  FieldTable t;
  uint32_t n = u32();
  if (!need(n)) return t;
  if (depth > kMaxDepth) {
    fail("field tables nested too deep");
    return t;
  }
  const size_t end = pos_ + n;
  while (ok() && pos_ < end) {
    FieldEntry e;
    e.name = shortstr();
    char type = static_cast<char>(u8());
    if (!ok()) break;
    e.value = value(type, depth);
    t.push_back(std::move(e));
  }
  if (ok() && pos_ != end) fail("a field table's entries overrun its size");
  return t;
}

std::vector<FieldValue> WireReader::array_at(int depth) {
  std::vector<FieldValue> a;
  uint32_t n = u32();
  if (!need(n)) return a;
  if (depth > kMaxDepth) {
    fail("field arrays nested too deep");
    return a;
  }
  const size_t end = pos_ + n;
  while (ok() && pos_ < end) {
    char type = static_cast<char>(u8());
    if (!ok()) break;
    a.push_back(value(type, depth));
  }
  if (ok() && pos_ != end) fail("a field array's items overrun its size");
  return a;
}

FieldValue WireReader::value(char type, int depth) {
  FieldValue v;
  v.type = type;
  switch (type) {
    case 't': v.i = u8() != 0 ? 1 : 0; break;
    case 'b': v.i = static_cast<int8_t>(u8()); break;
    case 'B': v.i = u8(); break;
    case 's': v.i = static_cast<int16_t>(u16()); break;
    case 'u': v.i = u16(); break;
    case 'I': v.i = static_cast<int32_t>(u32()); break;
    case 'i': v.i = u32(); break;
    case 'l': v.i = static_cast<int64_t>(u64()); break;
    case 'T': v.i = static_cast<int64_t>(u64()); break;
    case 'f': v.d = bits_to_float(u32()); break;
    case 'd': v.d = bits_to_double(u64()); break;
    case 'D':
      v.scale = u8();
      v.i = static_cast<int32_t>(u32());
      break;
    case 'S':
    case 'x': v.s = longstr(); break;
    case 'A': v.array = array_at(depth + 1); break;
    case 'F': v.table = table_at(depth + 1); break;
    case 'V': break;
    default: fail(fmt::format("unknown field value type '{}' (0x{:02x})", type, static_cast<uint8_t>(type)));
  }
  return v;
}

// --- WireWriter.

void WireWriter::shortstr(std::string_view s) {
  if (s.size() > 255) s = s.substr(0, 255);
  u8(static_cast<uint8_t>(s.size()));
  raw(s);
}

void WireWriter::longstr(std::string_view s) {
  u32(static_cast<uint32_t>(s.size()));
  raw(s);
}

void WireWriter::table(const FieldTable& t) {
  size_t at = skip(4);
  for (const auto& e : t) {
    shortstr(e.name);
    value(e.value);
  }
  patch_u32(at, static_cast<uint32_t>(size() - at - 4));
}

void WireWriter::array(const std::vector<FieldValue>& a) {
  size_t at = skip(4);
  for (const auto& v : a) value(v);
  patch_u32(at, static_cast<uint32_t>(size() - at - 4));
}

void WireWriter::value(const FieldValue& v) {
  u8(static_cast<uint8_t>(v.type));
  switch (v.type) {
    case 't':
    case 'b':
    case 'B': u8(static_cast<uint8_t>(v.i)); break;
    case 's':
    case 'u': u16(static_cast<uint16_t>(v.i)); break;
    case 'I':
    case 'i': u32(static_cast<uint32_t>(v.i)); break;
    case 'l':
    case 'T': u64(static_cast<uint64_t>(v.i)); break;
    case 'f': {
      float f = static_cast<float>(v.d);
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      u32(bits);
      break;
    }
    case 'd': {
      uint64_t bits;
      std::memcpy(&bits, &v.d, sizeof bits);
      u64(bits);
      break;
    }
    case 'D':
      u8(v.scale);
      u32(static_cast<uint32_t>(v.i));
      break;
    case 'S':
    case 'x': longstr(v.s); break;
    case 'A': array(v.array); break;
    case 'F': table(v.table); break;
    default: break;  // 'V': no value
  }
}

}  // namespace magnetar::protocol::amqp
