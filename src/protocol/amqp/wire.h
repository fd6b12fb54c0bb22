// AMQP 0-9-1 wire primitives: the one reader and writer of the protocol's
// scalar encodings and field tables, shared by methods, content headers and
// the broker's storage of AMQP properties.
//
// Integers are big-endian. shortstr is a 1-byte length + bytes (at most 255),
// longstr a 4-byte length + bytes. A field table is a 4-byte byte count, then
// (shortstr name, 1-byte type tag, value) pairs; a field array a 4-byte byte
// count, then (type tag, value) items. Type tags are RabbitMQ's (the set every
// client library sends): t bool, b int8, B uint8, s int16, u uint16, I int32,
// i uint32, l int64, f float, d double, D decimal (scale octet + int32),
// S longstr, x byte array, A array, T timestamp, F table, V void.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"
#include "common/status.h"

namespace magnetar::protocol::amqp {

struct FieldEntry;

// One field table or array value, tagged with its wire type so that what a
// client sent is sent back exactly.
struct FieldValue {
  char type = 'V';
  int64_t i = 0;       // t b B s u I i l T, and D's unscaled value
  double d = 0;        // f d
  uint8_t scale = 0;   // D
  std::string s;       // S x
  std::vector<FieldEntry> table;   // F
  std::vector<FieldValue> array;   // A

  static FieldValue of_string(std::string v);
  static FieldValue of_int(int64_t v);  // 'l'
  static FieldValue of_bool(bool v);
  // The value as text for a Pulsar property: strings as they are, numbers in
  // decimal, booleans "true"/"false"; tables and arrays have none (empty).
  std::string to_text() const;
  // Integer value of the integer types (t b B s u I i l T); 0 otherwise.
  bool is_integer() const;
  bool operator==(const FieldValue& o) const;
};

struct FieldEntry {
  std::string name;
  FieldValue value;
  bool operator==(const FieldEntry& o) const { return name == o.name && value == o.value; }
};

using FieldTable = std::vector<FieldEntry>;

// The entry named `name` in `t`, or null.
const FieldValue* find_field(const FieldTable& t, std::string_view name);

// Reads from one contiguous slice. Every read checks bounds: on short or
// invalid input the reader turns failed (status() says why) and later reads
// return zeros; callers check ok() once at the end of a unit.
class WireReader {
 public:
  explicit WireReader(common::Slice input) : in_(std::move(input)) {}

  uint8_t u8();
  uint16_t u16();
  uint32_t u32();
  uint64_t u64();
  std::string shortstr();
  std::string longstr();
  // A longstr as a view of the input (message bodies and stored properties).
  common::Slice longstr_slice();
  FieldTable table();
  common::Slice raw(size_t n);

  bool ok() const { return status_.is_ok(); }
  const common::Status& status() const { return status_; }
  void fail(std::string why);
  size_t remaining() const { return in_.size() - pos_; }
  size_t position() const { return pos_; }

 private:
  bool need(size_t n);
  FieldValue value(char type, int depth);
  FieldTable table_at(int depth);
  std::vector<FieldValue> array_at(int depth);
  common::Slice in_;
  size_t pos_ = 0;
  common::Status status_;
};

// Appends to a growing buffer (common::BufferWriter).
class WireWriter {
 public:
  explicit WireWriter(size_t initial_capacity = 256) : out_(initial_capacity) {}

  void u8(uint8_t v) { out_.put_u8(v); }
  void u16(uint16_t v) { out_.put_u16_be(v); }
  void u32(uint32_t v) { out_.put_u32_be(v); }
  void u64(uint64_t v) { out_.put_u64_be(v); }
  // REQUIRES: s.size() <= 255 (callers validate what peers send; our own
  // strings are short). Longer strings are cut at 255 bytes.
  void shortstr(std::string_view s);
  void longstr(std::string_view s);
  void table(const FieldTable& t);
  void raw(std::string_view b) { out_.append(b); }
  void raw(const void* data, size_t n) { out_.append(data, n); }

  size_t size() const { return out_.size(); }
  size_t skip(size_t n) { return out_.skip(n); }
  void patch_u32(size_t offset, uint32_t v) { out_.patch_u32_be(offset, v); }
  common::Slice finish() { return out_.finish(); }

 private:
  void value(const FieldValue& v);
  void array(const std::vector<FieldValue>& a);
  common::BufferWriter out_;
};

}  // namespace magnetar::protocol::amqp
