// Kafka wire primitives: the one reader and writer of the protocol's scalar
// encodings, shared by the schema codec, the headers and record batches.
//
// Fixed-width integers are big-endian. Unsigned varints are LEB128 (7 bits a
// byte, low first); signed varints zigzag-encode first (records use them).
// Classic strings are int16 length + bytes (-1 = null), classic bytes and
// arrays int32 length (-1 = null). Compact (flexible-version) strings, bytes
// and arrays carry uvarint(length + 1), 0 meaning null.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/bytes.h"
#include "common/status.h"

namespace magnetar::protocol::kafka {

// Reads from one contiguous slice. Every read checks bounds: on a short or
// invalid input the reader turns failed (status() says why) and later reads
// return zeros; callers check ok() once at the end of a unit.
class WireReader {
 public:
  explicit WireReader(common::Slice input) : in_(std::move(input)) {}

  int8_t i8();
  int16_t i16();
  int32_t i32();
  int64_t i64();
  uint32_t u32() { return static_cast<uint32_t>(i32()); }
  uint32_t uvarint();
  uint64_t uvarlong();
  int32_t varint();   // zigzag
  int64_t varlong();  // zigzag
  // A length-prefixed string: nullopt for null.
  std::optional<std::string> string(bool compact);
  // Length-prefixed bytes as a view of the input: nullopt for null.
  std::optional<common::Slice> bytes(bool compact);
  // An array's element count: -1 for null. Fails on counts that cannot fit
  // in what is left (each element takes at least one byte).
  int32_t array_length(bool compact);
  // `n` raw bytes as a view of the input.
  common::Slice raw(size_t n);
  // Skips a flexible struct's tagged fields (none are known to us).
  void skip_tagged_fields();

  bool ok() const { return status_.is_ok(); }
  const common::Status& status() const { return status_; }
  void fail(std::string why);
  size_t remaining() const { return in_.size() - pos_; }
  size_t position() const { return pos_; }

 private:
  bool need(size_t n);
  common::Slice in_;
  size_t pos_ = 0;
  common::Status status_;
};

// Appends to a growing buffer (common::BufferWriter).
class WireWriter {
 public:
  explicit WireWriter(size_t initial_capacity = 256) : out_(initial_capacity) {}

  void i8(int8_t v) { out_.put_u8(static_cast<uint8_t>(v)); }
  void i16(int16_t v) { out_.put_u16_be(static_cast<uint16_t>(v)); }
  void i32(int32_t v) { out_.put_u32_be(static_cast<uint32_t>(v)); }
  void i64(int64_t v) { out_.put_u64_be(static_cast<uint64_t>(v)); }
  void uvarint(uint64_t v);
  void varint(int64_t v);  // zigzag
  void string(const std::optional<std::string_view>& s, bool compact);
  void bytes(const std::optional<std::string_view>& b, bool compact);
  void array_length(int32_t n, bool compact);  // n = -1 for null
  void raw(std::string_view b) { out_.append(b); }
  void raw(const void* data, size_t n) { out_.append(data, n); }
  void empty_tagged_fields() { uvarint(0); }

  size_t size() const { return out_.size(); }
  size_t skip(size_t n) { return out_.skip(n); }
  void patch_i32(size_t offset, int32_t v) { out_.patch_u32_be(offset, static_cast<uint32_t>(v)); }
  uint8_t* at(size_t offset) { return out_.at(offset); }
  common::Slice finish() { return out_.finish(); }

 private:
  common::BufferWriter out_;
};

// Bytes a uvarint / zigzag varint of `v` takes.
size_t uvarint_size(uint64_t v);
size_t varint_size(int64_t v);

}  // namespace magnetar::protocol::kafka
