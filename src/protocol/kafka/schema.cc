#include "protocol/kafka/schema.h"

#include <cassert>
#include <cstdlib>

namespace magnetar::protocol::kafka {

namespace {

const std::vector<Struct> kNoStructs;
const std::vector<int64_t> kNoInts;
const std::vector<std::string> kNoStrings;

// Nesting deeper than any schema of ours: input that claims more is refused
// rather than recursed into.
constexpr int kMaxDepth = 8;

Struct decode_at(WireReader& in, const Schema& schema, int16_t version, bool flexible, int depth);

Value decode_field(WireReader& in, const Field& f, int16_t version, bool flexible, int depth) {
  const bool nullable = f.nullable_in(version);
  switch (f.type) {
    case FieldType::kBool: return int64_t{in.i8() != 0};
    case FieldType::kInt8: return int64_t{in.i8()};
    case FieldType::kInt16: return int64_t{in.i16()};
    case FieldType::kInt32: return int64_t{in.i32()};
    case FieldType::kInt64: return in.i64();
    case FieldType::kUuid: return in.raw(16).to_string();
    case FieldType::kString: {
      auto s = in.string(flexible);
      if (!s) {
        if (!nullable && in.ok()) in.fail(std::string("null for non-nullable string ") + std::string(f.name));
        return std::monostate{};
      }
      return std::move(*s);
    }
    case FieldType::kBytes: {
      auto b = in.bytes(flexible);
      if (!b) {
        if (!nullable && in.ok()) in.fail(std::string("null for non-nullable bytes ") + std::string(f.name));
        return std::monostate{};
      }
      return std::move(*b);
    }
    case FieldType::kStructArray: {
      int32_t n = in.array_length(flexible);
      if (n < 0) {
        if (!nullable && in.ok()) in.fail(std::string("null for non-nullable array ") + std::string(f.name));
        return std::monostate{};
      }
      std::vector<Struct> items;
      items.reserve(static_cast<size_t>(n));
      for (int32_t k = 0; k < n && in.ok(); ++k) items.push_back(decode_at(in, *f.element, version, flexible, depth + 1));
      return items;
    }
    case FieldType::kInt32Array:
    case FieldType::kInt64Array: {
      int32_t n = in.array_length(flexible);
      if (n < 0) return std::monostate{};
      std::vector<int64_t> items;
      items.reserve(static_cast<size_t>(n));
      for (int32_t k = 0; k < n && in.ok(); ++k) {
        items.push_back(f.type == FieldType::kInt32Array ? int64_t{in.i32()} : in.i64());
      }
      return items;
    }
    case FieldType::kStringArray: {
      int32_t n = in.array_length(flexible);
      if (n < 0) {
        if (!nullable && in.ok()) in.fail(std::string("null for non-nullable array ") + std::string(f.name));
        return std::monostate{};
      }
      std::vector<std::string> items;
      items.reserve(static_cast<size_t>(n));
      for (int32_t k = 0; k < n && in.ok(); ++k) {
        auto s = in.string(flexible);
        if (!s) {
          if (in.ok()) in.fail(std::string("null element in string array ") + std::string(f.name));
          break;
        }
        items.push_back(std::move(*s));
      }
      return items;
    }
  }
  return std::monostate{};
}

Struct decode_at(WireReader& in, const Schema& schema, int16_t version, bool flexible, int depth) {
  Struct s(schema);
  if (depth > kMaxDepth) {
    in.fail("nesting too deep");
    return s;
  }
  for (size_t k = 0; k < schema.fields.size() && in.ok(); ++k) {
    const Field& f = schema.fields[k];
    if (!f.present_in(version)) continue;
    s.values[k] = decode_field(in, f, version, flexible, depth);
  }
  if (flexible && in.ok()) in.skip_tagged_fields();
  return s;
}

}  // namespace

size_t Schema::index_of(std::string_view name) const {
  for (size_t k = 0; k < fields.size(); ++k) {
    if (fields[k].name == name) return k;
  }
  assert(false && "no such field in the schema");
  std::abort();
}

Struct decode_struct(WireReader& in, const Schema& schema, int16_t version, bool flexible) {
  return decode_at(in, schema, version, flexible, 0);
}

void encode_struct(WireWriter& out, const Struct& s, int16_t version, bool flexible) {
  const Schema& schema = *s.schema;
  for (size_t k = 0; k < schema.fields.size(); ++k) {
    const Field& f = schema.fields[k];
    if (!f.present_in(version)) continue;
    const Value& v = s.values[k];
    const bool null = std::holds_alternative<std::monostate>(v);
    switch (f.type) {
      case FieldType::kBool:
      case FieldType::kInt8: out.i8(static_cast<int8_t>(null ? f.default_int : std::get<int64_t>(v))); break;
      case FieldType::kInt16: out.i16(static_cast<int16_t>(null ? f.default_int : std::get<int64_t>(v))); break;
      case FieldType::kInt32: out.i32(static_cast<int32_t>(null ? f.default_int : std::get<int64_t>(v))); break;
      case FieldType::kInt64: out.i64(null ? f.default_int : std::get<int64_t>(v)); break;
      case FieldType::kUuid: {
        std::string id = null ? std::string() : std::get<std::string>(v);
        id.resize(16, '\0');
        out.raw(id);
        break;
      }
      case FieldType::kString:
        if (null) {
          out.string(f.nullable_in(version) ? std::nullopt : std::optional<std::string_view>(""), flexible);
        } else {
          out.string(std::string_view(std::get<std::string>(v)), flexible);
        }
        break;
      case FieldType::kBytes:
        if (null) {
          out.bytes(f.nullable_in(version) ? std::nullopt : std::optional<std::string_view>(""), flexible);
        } else {
          out.bytes(std::get<common::Slice>(v).view(), flexible);
        }
        break;
      case FieldType::kStructArray: {
        if (null) {
          out.array_length(f.nullable_in(version) ? -1 : 0, flexible);
          break;
        }
        if (const auto* generator = std::get_if<StructGenerator>(&v)) {
          out.array_length(static_cast<int32_t>(generator->count), flexible);
          for (size_t i = 0; i < generator->count; ++i) encode_struct(out, generator->make(i), version, flexible);
          break;
        }
        const auto& items = std::get<std::vector<Struct>>(v);
        out.array_length(static_cast<int32_t>(items.size()), flexible);
        for (const Struct& item : items) encode_struct(out, item, version, flexible);
        break;
      }
      case FieldType::kInt32Array:
      case FieldType::kInt64Array: {
        if (null) {
          out.array_length(f.nullable_in(version) ? -1 : 0, flexible);
          break;
        }
        const auto& items = std::get<std::vector<int64_t>>(v);
        out.array_length(static_cast<int32_t>(items.size()), flexible);
        for (int64_t x : items) {
          if (f.type == FieldType::kInt32Array) {
            out.i32(static_cast<int32_t>(x));
          } else {
            out.i64(x);
          }
        }
        break;
      }
      case FieldType::kStringArray: {
        if (null) {
          out.array_length(f.nullable_in(version) ? -1 : 0, flexible);
          break;
        }
        const auto& items = std::get<std::vector<std::string>>(v);
        out.array_length(static_cast<int32_t>(items.size()), flexible);
        for (const std::string& x : items) out.string(std::string_view(x), flexible);
        break;
      }
    }
  }
  if (flexible) out.empty_tagged_fields();
}

int64_t Struct::i(std::string_view name) const {
  size_t k = schema->index_of(name);
  if (const auto* v = std::get_if<int64_t>(&values[k])) return *v;
  return schema->fields[k].default_int;
}

std::string Struct::str(std::string_view name) const {
  if (const auto* v = std::get_if<std::string>(&values[schema->index_of(name)])) return *v;
  return {};
}

bool Struct::is_null(std::string_view name) const {
  return std::holds_alternative<std::monostate>(values[schema->index_of(name)]);
}

const common::Slice* Struct::bytes(std::string_view name) const {
  return std::get_if<common::Slice>(&values[schema->index_of(name)]);
}

const std::vector<Struct>& Struct::array(std::string_view name) const {
  if (const auto* v = std::get_if<std::vector<Struct>>(&values[schema->index_of(name)])) return *v;
  return kNoStructs;
}

const std::vector<int64_t>& Struct::ints(std::string_view name) const {
  if (const auto* v = std::get_if<std::vector<int64_t>>(&values[schema->index_of(name)])) return *v;
  return kNoInts;
}

Struct& Struct::set(std::string_view name, int64_t v) {
  values[schema->index_of(name)] = v;
  return *this;
}

Struct& Struct::set(std::string_view name, std::string v) {
  values[schema->index_of(name)] = std::move(v);
  return *this;
}

const std::vector<std::string>& Struct::strings(std::string_view name) const {
  if (const auto* v = std::get_if<std::vector<std::string>>(&values[schema->index_of(name)])) return *v;
  return kNoStrings;
}

Struct& Struct::set(std::string_view name, std::vector<std::string> v) {
  values[schema->index_of(name)] = std::move(v);
  return *this;
}

Struct& Struct::set(std::string_view name, common::Slice v) {
  values[schema->index_of(name)] = std::move(v);
  return *this;
}

Struct& Struct::set(std::string_view name, std::vector<int64_t> v) {
  values[schema->index_of(name)] = std::move(v);
  return *this;
}

Struct& Struct::add(std::string_view name) {
  size_t k = schema->index_of(name);
  if (!std::holds_alternative<std::vector<Struct>>(values[k])) values[k] = std::vector<Struct>();
  auto& items = std::get<std::vector<Struct>>(values[k]);
  items.emplace_back(*schema->fields[k].element);
  return items.back();
}

Struct& Struct::set(std::string_view name, StructGenerator v) {
  values[schema->index_of(name)] = std::move(v);
  return *this;
}

Struct Struct::element(std::string_view name) const { return Struct(*schema->fields[schema->index_of(name)].element); }

Struct& Struct::set_null(std::string_view name) {
  values[schema->index_of(name)] = std::monostate{};
  return *this;
}

}  // namespace magnetar::protocol::kafka
