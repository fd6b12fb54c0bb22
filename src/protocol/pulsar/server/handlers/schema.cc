// GET_SCHEMA, GET_OR_CREATE_SCHEMA: the versions of a topic's schema, kept by
// broker::SchemaRegistry (blocking: its calls run on the tenancy thread).
#include "broker/schema_registry.h"
#include "common/logging.h"
#include "protocol/pulsar/commands.h"
#include "protocol/pulsar/server/pulsar_connection.h"

namespace magnetar::protocol::pulsar {

using common::Result;
using common::Status;

Result<broker::SchemaInfo> schema_from_wire(const proto::Schema& s) {
  int type = static_cast<int>(s.type());
  if (type < 0 || type > broker::kMaxSchemaType) {
    return Status::invalid_argument("schema type " + std::to_string(type) + " cannot be stored on a topic");
  }
  broker::SchemaInfo info;
  info.type = static_cast<broker::SchemaType>(type);
  info.name = s.name();
  info.data = s.schema_data();
  for (const auto& kv : s.properties()) info.properties[kv.key()] = kv.value();
  return info;
}

namespace {

proto::Schema schema_to_wire(const broker::SchemaInfo& info) {
  proto::Schema s;
  s.set_name(info.name);
  s.set_schema_data(info.data);
  s.set_type(static_cast<proto::Schema::Type>(info.type));
  for (const auto& [k, v] : info.properties) {
    auto* kv = s.add_properties();
    kv->set_key(k);
    kv->set_value(v);
  }
  return s;
}

// Runs `work` on the tenancy thread; answers ServiceNotReady through
// `refused` on this reactor when it cannot be queued.
void on_metadata(PulsarConnection& c, std::function<void()> work, std::function<void(const Status&)> refused) {
  if (c.service().schemas() == nullptr) {
    refused(Status::unavailable("this broker keeps no schemas"));
    return;
  }
  Status st = c.service().on_metadata_thread(std::move(work));
  if (!st.is_ok()) refused(st);
}

}  // namespace

void register_schema(PulsarConnection& c, const broker::TopicName& topic, const proto::Schema& schema,
                     std::function<void(PulsarConnection&, Result<std::string>)> then) {
  auto info = schema_from_wire(schema);
  if (!info.is_ok()) {
    then(c, info.status());
    return;
  }
  auto* schemas = c.service().schemas();
  on_metadata(
      c,
      [schemas, topic, info = std::move(*info), reply = c.request_replier(), then]() {
        auto version = schemas->get_or_create(topic, info);
        Result<std::string> out = version.is_ok() ? Result<std::string>(broker::encode_schema_version(*version))
                                                  : Result<std::string>(version.status());
        reply([then, out = std::move(out)](PulsarConnection& conn) { then(conn, out); });
      },
      [&c, then](const Status& st) { then(c, st); });
}

void handle_get_schema(PulsarConnection& c, const proto::CommandGetSchema& cmd) {
  uint64_t request_id = cmd.request_id();
  auto answer_error = [request_id](PulsarConnection& conn, proto::ServerError code, const std::string& message) {
    proto::BaseCommand out;
    out.set_type(proto::BaseCommand::GET_SCHEMA_RESPONSE);
    auto* r = out.mutable_getschemaresponse();
    r->set_request_id(request_id);
    r->set_error_code(code);
    r->set_error_message(message);
    conn.send(out);
  };
  auto topic = broker::TopicName::parse(cmd.topic());
  if (!topic) return answer_error(c, proto::InvalidTopicName, topic.status().message());
  if (auto allowed = c.service().authorization().check(c.role, *topic, broker::TopicAction::kLookup);
      !allowed.is_ok()) {
    return answer_error(c, proto::AuthorizationError, allowed.message());
  }
  std::optional<int64_t> version;
  if (cmd.has_schema_version() && !cmd.schema_version().empty()) {
    auto v = broker::decode_schema_version(cmd.schema_version());
    if (!v.is_ok()) return answer_error(c, proto::MetadataError, v.status().message());
    version = *v;
  }
  auto* schemas = c.service().schemas();
  on_metadata(
      c,
      [schemas, topic = *topic, version, request_id, answer_error,
       reply = c.request_replier(broker::kMaxSchemaBytes)]() {
        auto found = schemas->get(topic, version);
        reply([found = std::move(found), request_id, answer_error](PulsarConnection& conn) {
          if (!found.is_ok()) {
            // Pulsar's answer when a topic has no schema.
            bool missing = found.status().code() == common::ErrorCode::kNotFound;
            return answer_error(conn, missing ? proto::TopicNotFound : server_error(found.status()),
                                found.status().message());
          }
          proto::BaseCommand out;
          out.set_type(proto::BaseCommand::GET_SCHEMA_RESPONSE);
          auto* r = out.mutable_getschemaresponse();
          r->set_request_id(request_id);
          *r->mutable_schema() = schema_to_wire(found->info);
          r->set_schema_version(broker::encode_schema_version(found->version));
          conn.send(out);
        });
      },
      [&c, answer_error](const Status& st) { answer_error(c, proto::ServiceNotReady, st.message()); });
}

void handle_get_or_create_schema(PulsarConnection& c, const proto::CommandGetOrCreateSchema& cmd) {
  uint64_t request_id = cmd.request_id();
  auto answer = [request_id](PulsarConnection& conn, const Result<std::string>& version) {
    proto::BaseCommand out;
    out.set_type(proto::BaseCommand::GET_OR_CREATE_SCHEMA_RESPONSE);
    auto* r = out.mutable_getorcreateschemaresponse();
    r->set_request_id(request_id);
    if (version.is_ok()) {
      r->set_schema_version(*version);
    } else {
      auto code = version.status().code() == common::ErrorCode::kInvalidArgument ? proto::IncompatibleSchema
                                                                                 : server_error(version.status());
      r->set_error_code(code);
      r->set_error_message(version.status().message());
    }
    conn.send(out);
  };
  auto topic = broker::TopicName::parse(cmd.topic());
  if (!topic) {
    proto::BaseCommand out;
    out.set_type(proto::BaseCommand::GET_OR_CREATE_SCHEMA_RESPONSE);
    auto* r = out.mutable_getorcreateschemaresponse();
    r->set_request_id(request_id);
    r->set_error_code(proto::InvalidTopicName);
    r->set_error_message(topic.status().message());
    c.send(out);
    return;
  }
  // Registering a schema is what a producer does.
  if (auto allowed = c.service().authorization().check(c.role, *topic, broker::TopicAction::kProduce);
      !allowed.is_ok()) {
    return answer(c, allowed);
  }
  register_schema(c, *topic, cmd.schema(), answer);
}

}  // namespace magnetar::protocol::pulsar
