// ApiVersions: the APIs and versions this broker serves. Clients send it
// first and pick, per API, the highest version both sides know.
#include "protocol/kafka/errors.h"
#include "protocol/kafka/server/kafka_connection.h"

namespace magnetar::protocol::kafka {

namespace {

Struct served_versions(const Request& request, ErrorCode error) {
  Struct resp = request.response();
  resp.set("ErrorCode", int64_t{error});
  for (const ApiSpec& a : served_apis()) {
    auto& key = resp.add("ApiKeys");
    key.set("ApiKey", int64_t{a.key});
    key.set("MinVersion", int64_t{a.min_version});
    key.set("MaxVersion", int64_t{a.max_version});
  }
  resp.set("ThrottleTimeMs", int64_t{0});
  return resp;
}

}  // namespace

void handle_api_versions(KafkaConnection& c, const Request& request) {
  c.respond(request, served_versions(request, kNone));
}

void answer_unsupported_api_versions(KafkaConnection& c, const Request& request) {
  Request v0 = request;
  v0.header.api_version = 0;
  v0.body = Struct();
  c.respond(v0, served_versions(v0, kUnsupportedVersion));
}

}  // namespace magnetar::protocol::kafka
