// SchemaRegistry: the schemas of topics, with a version per change.
//
// Producers and consumers register the schema they use (Pulsar's
// GET_OR_CREATE_SCHEMA, the schema in PRODUCER and SUBSCRIBE, the REST
// /admin/v2/schemas API); an identical schema answers the version it already
// has, a different one gets the next version. Versions count from 0 and are
// never reused: deleting a topic's schema appends a tombstone, and the next
// registration takes the version after it. Compatibility strategies are not
// enforced: every new schema is accepted.
//
// The history of a topic is one metadata record (schemas.fbs), updated with
// compare-and-set, so concurrent registrations of the same schema agree on
// one version. The partitions of a partitioned topic share their base
// topic's history, as in Pulsar.
//
// Threads: every method blocks on the metadata store. Call them on the
// tenancy thread (Tenancy::submit), never on a reactor.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "broker/naming.h"
#include "common/result.h"
#include "metadata/store.h"

namespace magnetar::broker {

// Type numbers are Pulsar's (Schema.Type in the wire protocol).
enum class SchemaType : int32_t {
  kNone = 0, kString = 1, kJson = 2, kProtobuf = 3, kAvro = 4, kBoolean = 5, kInt8 = 6,
  kInt16 = 7, kInt32 = 8, kInt64 = 9, kFloat = 10, kDouble = 11, kDate = 12, kTime = 13,
  kTimestamp = 14, kKeyValue = 15, kInstant = 16, kLocalDate = 17, kLocalTime = 18,
  kLocalDateTime = 19, kProtobufNative = 20,
};
inline constexpr int32_t kMaxSchemaType = 20;
// Pulsar's REST names: "STRING", "AVRO", "KEY_VALUE", ...; "NONE" for 0.
std::string_view schema_type_name(SchemaType t);
common::Result<SchemaType> parse_schema_type(std::string_view name);

struct SchemaInfo {
  SchemaType type = SchemaType::kNone;
  std::string name;
  std::string data;
  std::map<std::string, std::string> properties;
  bool same_definition(const SchemaInfo& o) const {
    return type == o.type && data == o.data && properties == o.properties;
  }
};

struct StoredSchema {
  SchemaInfo info;
  int64_t version = 0;
  int64_t timestamp_ms = 0;
};

// Largest schema definition accepted, as Pulsar's default.
inline constexpr size_t kMaxSchemaBytes = 1 << 20;

std::string schema_key(const TopicName& topic);

// The wire form of a version (Pulsar: 8 bytes, big-endian) and back.
std::string encode_schema_version(int64_t version);
common::Result<int64_t> decode_schema_version(std::string_view bytes);

class SchemaRegistry {
 public:
  explicit SchemaRegistry(metadata::Store& store) : store_(store) {}

  // The latest schema, or `version`. NotFound when the topic has none (or
  // it was deleted, for the latest), or the version does not exist.
  common::Result<StoredSchema> get(const TopicName& topic, std::optional<int64_t> version = std::nullopt);
  // Every version still live, oldest first (empty when none).
  common::Result<std::vector<StoredSchema>> list(const TopicName& topic);
  // The version of `schema`: an existing live one with the same definition,
  // else a new one. InvalidArgument for a bad type or an oversize schema.
  common::Result<int64_t> get_or_create(const TopicName& topic, const SchemaInfo& schema);
  // Deletes the topic's schema (a tombstone version); answers that version.
  // NotFound when there is none.
  common::Result<int64_t> remove(const TopicName& topic);
  // Forgets the history outright (when its topic is deleted). Ok when none.
  common::Status forget(const TopicName& topic);

 private:
  metadata::Store& store_;
};

}  // namespace magnetar::broker
