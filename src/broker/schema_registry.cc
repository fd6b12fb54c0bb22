#include "broker/schema_registry.h"

#include <flatbuffers/flatbuffers.h>

#include <array>
#include <chrono>

#include "common/clock.h"
#include "broker/schemas_generated.h"
#include "metadata/blocking.h"

namespace magnetar::broker {

using common::ErrorCode;
using common::Result;
using common::Status;

namespace {

constexpr std::array<std::string_view, kMaxSchemaType + 1> kTypeNames = {
    "NONE",  "STRING", "JSON",  "PROTOBUF", "AVRO",      "BOOLEAN",    "INT8",
    "INT16", "INT32",  "INT64", "FLOAT",    "DOUBLE",    "DATE",       "TIME",
    "TIMESTAMP", "KEY_VALUE", "INSTANT", "LOCAL_DATE", "LOCAL_TIME", "LOCAL_DATE_TIME",
    "PROTOBUF_NATIVE"};

constexpr int kMaxSchemaCasAttempts = 16;

struct Version {
  SchemaInfo info;
  int64_t timestamp_ms = 0;
  bool deleted = false;
};

struct History {
  std::vector<Version> versions;
  int64_t record_version = metadata::kMustNotExist;  // for compare-and-set
  // Versions from here on are live (after the last tombstone).
  size_t live_from() const {
    for (size_t i = versions.size(); i > 0; --i) {
      if (versions[i - 1].deleted) return i;
    }
    return 0;
  }
};

std::string encode(const History& h) {
  flatbuffers::FlatBufferBuilder b(256);
  std::vector<flatbuffers::Offset<fb::SchemaVersion>> versions;
  for (const auto& v : h.versions) {
    std::vector<flatbuffers::Offset<fb::SchemaProperty>> props;
    for (const auto& [k, val] : v.info.properties) {
      props.push_back(fb::CreateSchemaProperty(b, b.CreateString(k), b.CreateString(val)));
    }
    auto data = b.CreateVector(reinterpret_cast<const uint8_t*>(v.info.data.data()), v.info.data.size());
    versions.push_back(fb::CreateSchemaVersion(b, static_cast<int32_t>(v.info.type), b.CreateString(v.info.name),
                                               data, b.CreateVector(props), v.timestamp_ms, v.deleted));
  }
  b.Finish(fb::CreateSchemaHistory(b, 1, b.CreateVector(versions)));
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

Result<History> load(metadata::Store& store, const TopicName& topic) {
  History h;
  auto r = metadata::blocking::get(store, schema_key(topic));
  if (!r.is_ok()) {
    if (r.status().code() == ErrorCode::kNotFound) return h;
    return r.status();
  }
  h.record_version = r->stat.version;
  flatbuffers::Verifier v(reinterpret_cast<const uint8_t*>(r->value.data()), r->value.size());
  if (!fb::VerifySchemaHistoryBuffer(v)) {
    return Status::corruption("the schema record of " + topic.to_string() + " is corrupt");
  }
  auto* rec = fb::GetSchemaHistory(r->value.data());
  if (rec->versions()) {
    for (const auto* sv : *rec->versions()) {
      Version out;
      out.info.type = static_cast<SchemaType>(sv->type());
      if (sv->name()) out.info.name = sv->name()->str();
      if (sv->data()) out.info.data.assign(reinterpret_cast<const char*>(sv->data()->data()), sv->data()->size());
      if (sv->properties()) {
        for (const auto* p : *sv->properties()) {
          out.info.properties[p->key() ? p->key()->str() : ""] = p->value() ? p->value()->str() : "";
        }
      }
      out.timestamp_ms = sv->timestamp_ms();
      out.deleted = sv->deleted();
      h.versions.push_back(std::move(out));
    }
  }
  return h;
}

// Writes `h` back; FailedPrecondition/AlreadyExists when someone else wrote first.
Status store_history(metadata::Store& store, const TopicName& topic, const History& h) {
  metadata::PutOptions options;
  options.expected_version = h.record_version;
  auto r = metadata::blocking::put(store, schema_key(topic), encode(h), options);
  return r.is_ok() ? Status::ok() : r.status();
}

bool lost_race(const Status& st) {
  return st.code() == ErrorCode::kFailedPrecondition || st.code() == ErrorCode::kAlreadyExists ||
         st.code() == ErrorCode::kNotFound;
}

StoredSchema stored(const History& h, size_t i) {
  return StoredSchema{h.versions[i].info, static_cast<int64_t>(i), h.versions[i].timestamp_ms};
}

}  // namespace

std::string_view schema_type_name(SchemaType t) {
  auto i = static_cast<int32_t>(t);
  return i >= 0 && i <= kMaxSchemaType ? kTypeNames[static_cast<size_t>(i)] : "UNKNOWN";
}

Result<SchemaType> parse_schema_type(std::string_view name) {
  for (size_t i = 0; i < kTypeNames.size(); ++i) {
    if (kTypeNames[i] == name) return static_cast<SchemaType>(i);
  }
  if (name == "BYTES") return SchemaType::kNone;
  return Status::invalid_argument("unknown schema type '" + std::string(name) +
                                  "'; expected one of STRING, JSON, AVRO, PROTOBUF, KEY_VALUE, INT64, ...");
}

std::string schema_key(const TopicName& topic) {
  TopicName base = topic.base();
  return "/schemas/" + base.ns.to_string() + "/" + base.local;
}

std::string encode_schema_version(int64_t version) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(static_cast<uint64_t>(version) >> (56 - 8 * i));
  return out;
}

Result<int64_t> decode_schema_version(std::string_view bytes) {
  if (bytes.size() != 8) {
    return Status::invalid_argument("a schema version is 8 bytes, not " + std::to_string(bytes.size()));
  }
  uint64_t v = 0;
  for (char c : bytes) v = v << 8 | static_cast<uint8_t>(c);
  return static_cast<int64_t>(v);
}

Result<StoredSchema> SchemaRegistry::get(const TopicName& topic, std::optional<int64_t> version) {
  auto h = load(store_, topic);
  if (!h.is_ok()) return h.status();
  if (version) {
    if (*version < 0 || *version >= static_cast<int64_t>(h->versions.size()) ||
        h->versions[static_cast<size_t>(*version)].deleted) {
      return Status::not_found("topic " + topic.to_string() + " has no schema version " + std::to_string(*version));
    }
    return stored(*h, static_cast<size_t>(*version));
  }
  if (h->versions.empty() || h->versions.back().deleted) {
    return Status::not_found("topic " + topic.to_string() + " has no schema");
  }
  return stored(*h, h->versions.size() - 1);
}

Result<std::vector<StoredSchema>> SchemaRegistry::list(const TopicName& topic) {
  auto h = load(store_, topic);
  if (!h.is_ok()) return h.status();
  std::vector<StoredSchema> out;
  for (size_t i = h->live_from(); i < h->versions.size(); ++i) out.push_back(stored(*h, i));
  return out;
}

Result<int64_t> SchemaRegistry::get_or_create(const TopicName& topic, const SchemaInfo& schema) {
  auto type = static_cast<int32_t>(schema.type);
  if (type < 0 || type > kMaxSchemaType) {
    return Status::invalid_argument("unknown schema type " + std::to_string(type));
  }
  if (schema.data.size() > kMaxSchemaBytes) {
    return Status::invalid_argument("schema of " + std::to_string(schema.data.size()) + " bytes is over the limit of " +
                                    std::to_string(kMaxSchemaBytes));
  }
  for (int attempt = 0; attempt < kMaxSchemaCasAttempts; ++attempt) {
    auto h = load(store_, topic);
    if (!h.is_ok()) return h.status();
    for (size_t i = h->live_from(); i < h->versions.size(); ++i) {
      if (h->versions[i].info.same_definition(schema)) return static_cast<int64_t>(i);
    }
    h->versions.push_back(Version{schema, common::wall_clock_ms(), false});
    Status st = store_history(store_, topic, *h);
    if (st.is_ok()) return static_cast<int64_t>(h->versions.size() - 1);
    if (!lost_race(st)) return st;
  }
  return Status::unavailable("schema of " + topic.to_string() + " is being changed concurrently; retry");
}

Result<int64_t> SchemaRegistry::remove(const TopicName& topic) {
  for (int attempt = 0; attempt < kMaxSchemaCasAttempts; ++attempt) {
    auto h = load(store_, topic);
    if (!h.is_ok()) return h.status();
    if (h->versions.empty() || h->versions.back().deleted) {
      return Status::not_found("topic " + topic.to_string() + " has no schema");
    }
    Version tomb;
    tomb.timestamp_ms = common::wall_clock_ms();
    tomb.deleted = true;
    h->versions.push_back(std::move(tomb));
    Status st = store_history(store_, topic, *h);
    if (st.is_ok()) return static_cast<int64_t>(h->versions.size() - 1);
    if (!lost_race(st)) return st;
  }
  return Status::unavailable("schema of " + topic.to_string() + " is being changed concurrently; retry");
}

Status SchemaRegistry::forget(const TopicName& topic) {
  Status st = metadata::blocking::del(store_, schema_key(topic));
  return st.code() == ErrorCode::kNotFound ? Status::ok() : st;
}

}  // namespace magnetar::broker
