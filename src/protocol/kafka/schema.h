// Kafka message schemas as data: each API's request and response is a table
// of fields (name, type, the versions it exists in, the versions it may be
// null in), and one generic codec reads and writes any of them at any
// version. Adding a version or an API is a table edit (messages.cc), not a
// new codec.
//
// A flexible version (KIP-482) writes strings, bytes and arrays compactly and
// ends every struct with tagged fields; we send none and skip the ones we
// receive.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/bytes.h"
#include "common/result.h"
#include "protocol/kafka/wire.h"

namespace magnetar::protocol::kafka {

enum class FieldType {
  kBool,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUuid,        // 16 bytes, kept as a 16-byte string
  kString,      // nullable in nullable_versions
  kBytes,       // also record sets; nullable in nullable_versions
  kStructArray,  // elements described by `element`
  kInt32Array,
  kInt64Array,
  kStringArray,  // nullable in nullable_versions
};

inline constexpr int16_t kNoVersion = 0x7fff;

struct Schema;

struct Field {
  std::string_view name;
  FieldType type;
  int16_t min_version = 0;
  int16_t max_version = kNoVersion;  // inclusive
  int16_t nullable_from = kNoVersion;
  const Schema* element = nullptr;  // kStructArray only
  int64_t default_int = 0;          // written for an integer left unset

  bool present_in(int16_t v) const { return v >= min_version && v <= max_version; }
  bool nullable_in(int16_t v) const { return v >= nullable_from; }
};

struct Schema {
  std::vector<Field> fields;
  // Index of the field named `name`; REQUIRES: it exists (schemas are ours).
  size_t index_of(std::string_view name) const;
};

struct Struct;

// A struct array made while it is encoded: element i is make(i), encoded
// and dropped before element i + 1 is made, so a response with a large
// array (Metadata's topics and their partitions) is never held whole as
// Structs, only as its encoded bytes. Encoding only: decoding never makes
// one, and array() does not look into it.
struct StructGenerator {
  size_t count = 0;
  std::function<Struct(size_t)> make;
};

// A field's value. monostate: unset, or null on the wire.
using Value = std::variant<std::monostate, int64_t, std::string, common::Slice, std::vector<Struct>,
                           std::vector<int64_t>, std::vector<std::string>, StructGenerator>;

// One decoded (or to-be-encoded) struct: a value per schema field, by index.
// Accessors name fields; naming a field the schema lacks is a programming
// error (asserted), reading a field absent in this version gives its default.
struct Struct {
  const Schema* schema = nullptr;
  std::vector<Value> values;

  explicit Struct(const Schema& s) : schema(&s), values(s.fields.size()) {}
  Struct() = default;

  int64_t i(std::string_view name) const;
  // The string, or "" when null.
  std::string str(std::string_view name) const;
  bool is_null(std::string_view name) const;
  const common::Slice* bytes(std::string_view name) const;
  const std::vector<Struct>& array(std::string_view name) const;
  const std::vector<int64_t>& ints(std::string_view name) const;
  const std::vector<std::string>& strings(std::string_view name) const;

  Struct& set(std::string_view name, int64_t v);
  Struct& set(std::string_view name, std::string v);
  Struct& set(std::string_view name, common::Slice v);
  Struct& set(std::string_view name, std::vector<int64_t> v);
  Struct& set(std::string_view name, std::vector<std::string> v);
  // Appends an element to struct array `name` and returns it.
  Struct& add(std::string_view name);
  // Struct array `name` made element by element as it is encoded.
  Struct& set(std::string_view name, StructGenerator v);
  // An empty element of struct array `name`, to fill in (for a
  // StructGenerator).
  Struct element(std::string_view name) const;
  Struct& set_null(std::string_view name);
};

// Decodes `schema` at `version` from the reader (stopping at the first
// error the reader records).
Struct decode_struct(WireReader& in, const Schema& schema, int16_t version, bool flexible);
// Encodes `s` at `version`.
void encode_struct(WireWriter& out, const Struct& s, int16_t version, bool flexible);

}  // namespace magnetar::protocol::kafka
