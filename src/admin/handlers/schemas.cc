// /admin/v2/schemas/{tenant}/{namespace}/{topic}/...: a topic's schema
// versions, as Pulsar's REST API shows them (pulsar-admin schemas ...).
//
//   GET    .../schema            the latest: {"version", "type", "timestamp", "data", "properties"}
//   GET    .../schema/{version}  one version
//   GET    .../versions          every live version: {"getSchemaResponses": [...]}
//   POST   .../schema            {"type": "AVRO", "schema": "...", "properties": {...}} -> {"version": N}
//   DELETE .../schema            a tombstone version -> {"version": N}
//
// The blocking registry calls run on the tenancy thread.
#include "admin/handlers.h"
#include "admin/handlers/policy_json.h"
#include "admin/handlers/tenancy_common.h"
#include "broker/schema_registry.h"

namespace magnetar::admin {

using common::Result;
using common::Status;

namespace {

Json to_json(const broker::StoredSchema& s) {
  Json props = Json::object();
  for (const auto& [k, v] : s.info.properties) props[k] = v;
  return Json{{"version", s.version},
              {"type", std::string(broker::schema_type_name(s.info.type))},
              {"timestamp", s.timestamp_ms},
              {"data", s.info.data},
              {"properties", props}};
}

// The topic of the request, in a namespace that exists.
Result<broker::TopicName> topic_of(broker::Tenancy& tenancy, HttpRequest& req) {
  auto topic = broker::TopicName::of(broker::TopicDomain::kPersistent, req.param("tenant"), req.param("namespace"),
                                     req.param("topic"));
  if (!topic.is_ok()) return topic.status();
  auto ns = tenancy.get_policies(topic->ns);
  if (!ns.is_ok()) return ns.status();
  return topic;
}

Result<broker::SchemaInfo> schema_from_json(const Json& j) {
  if (!j.is_object()) return Status::invalid_argument("the body must be {\"type\": ..., \"schema\": ..., \"properties\": {...}}");
  broker::SchemaInfo info;
  if (!j.contains("type") || !j["type"].is_string()) return Status::invalid_argument("\"type\" must be a string such as \"AVRO\"");
  auto type = broker::parse_schema_type(j["type"].get<std::string>());
  if (!type.is_ok()) return type.status();
  info.type = *type;
  if (j.contains("schema")) {
    if (!j["schema"].is_string()) return Status::invalid_argument("\"schema\" must be a string");
    info.data = j["schema"].get<std::string>();
  }
  if (j.contains("properties") && !j["properties"].is_null()) {
    if (!j["properties"].is_object()) return Status::invalid_argument("\"properties\" must be an object of strings");
    for (const auto& [k, v] : j["properties"].items()) {
      if (!v.is_string()) return Status::invalid_argument("property \"" + k + "\" must be a string");
      info.properties[k] = v.get<std::string>();
    }
  }
  return info;
}

}  // namespace

void register_schema_routes(Router& router, broker::Tenancy& tenancy, broker::SchemaRegistry& schemas) {
  const std::string base = "/admin/v2/schemas/{tenant}/{namespace}/{topic}";
  auto get_one = [&tenancy, &schemas](HttpRequest& req, Responder respond) {
    std::string version = req.param("version");
    run_blocking(tenancy, std::move(respond), [&tenancy, &schemas, req, version]() mutable {
      auto topic = topic_of(tenancy, req);
      if (!topic.is_ok()) return error_response(topic.status());
      std::optional<int64_t> v;
      if (!version.empty()) {
        char* end = nullptr;
        long long n = std::strtoll(version.c_str(), &end, 10);
        if (*end != '\0' || n < 0) return HttpResponse::error(400, "the version must be a number >= 0");
        v = n;
      }
      auto found = schemas.get(*topic, v);
      return found.is_ok() ? HttpResponse::json(200, to_json(*found)) : error_response(found.status());
    });
  };
  router.get(base + "/schema", get_one);
  router.get(base + "/schema/{version}", get_one);
  router.get(base + "/versions", [&tenancy, &schemas](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [&tenancy, &schemas, req]() mutable {
      auto topic = topic_of(tenancy, req);
      if (!topic.is_ok()) return error_response(topic.status());
      auto all = schemas.list(*topic);
      if (!all.is_ok()) return error_response(all.status());
      if (all->empty()) return HttpResponse::error(404, "topic " + topic->to_string() + " has no schema");
      Json list = Json::array();
      for (const auto& s : *all) list.push_back(to_json(s));
      return HttpResponse::json(200, Json{{"getSchemaResponses", list}});
    });
  });
  router.post(base + "/schema", [&tenancy, &schemas](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [&tenancy, &schemas, req]() mutable {
      auto topic = topic_of(tenancy, req);
      if (!topic.is_ok()) return error_response(topic.status());
      auto body = parse_json_body(req.body);
      if (!body.is_ok()) return error_response(body.status());
      auto info = schema_from_json(*body);
      if (!info.is_ok()) return error_response(info.status());
      auto version = schemas.get_or_create(*topic, *info);
      return version.is_ok() ? HttpResponse::json(200, Json{{"version", *version}}) : error_response(version.status());
    });
  });
  router.del(base + "/schema", [&tenancy, &schemas](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [&tenancy, &schemas, req]() mutable {
      auto topic = topic_of(tenancy, req);
      if (!topic.is_ok()) return error_response(topic.status());
      auto version = schemas.remove(*topic);
      return version.is_ok() ? HttpResponse::json(200, Json{{"version", *version}}) : error_response(version.status());
    });
  });
}

}  // namespace magnetar::admin
