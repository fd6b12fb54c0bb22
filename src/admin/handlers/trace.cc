// Message traces of a topic (broker/trace_lookup.h):
//   GET /admin/v2/{domain}/{tenant}/{namespace}/{topic}/trace
//       ?messageId=L:E | key=K | property=name:value | producer=P [&from=ms&to=ms] [&limit=n]
// 200 with each matching message's timeline, 404 with a reason when no
// traced message matches.
#include <charconv>

#include "admin/handlers.h"
#include "admin/handlers/policy_json.h"
#include "admin/handlers/tenancy_common.h"
#include "admin/handlers/topic_common.h"
#include "admin/handlers/topic_stats_json.h"
#include "broker/trace_lookup.h"

namespace magnetar::admin {

using broker::TopicDomain;
using broker::TraceEvent;
using broker::TraceQuery;
using common::Result;
using common::Status;

namespace {

Result<int64_t> integer(const std::string& s, const std::string& what) {
  int64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) {
    return Status::invalid_argument(what + " must be an integer, not '" + s + "'");
  }
  return v;
}

// "L:E", also Pulsar's longer forms "L:E:P" and "L:E:P:B".
Result<ledger::Position> message_id(const std::string& s) {
  auto bad = Status::invalid_argument("messageId must be ledgerId:entryId, not '" + s + "'");
  size_t colon = s.find(':');
  if (colon == std::string::npos) return bad;
  size_t end = s.find(':', colon + 1);
  auto ledger = integer(s.substr(0, colon), "ledgerId");
  auto entry = integer(s.substr(colon + 1, end == std::string::npos ? std::string::npos : end - colon - 1), "entryId");
  if (!ledger.is_ok() || !entry.is_ok() || *ledger < 0 || *entry < 0) return bad;
  return ledger::Position{static_cast<uint64_t>(*ledger), *entry};
}

Result<TraceQuery> query_of(const HttpRequest& req) {
  TraceQuery q;
  auto get = [&](const char* name) -> const std::string* {
    auto it = req.query.find(name);
    return it == req.query.end() ? nullptr : &it->second;
  };
  if (const auto* id = get("messageId")) {
    auto p = message_id(*id);
    if (!p.is_ok()) return p.status();
    q.position = *p;
  }
  if (const auto* k = get("key")) q.key = *k;
  if (const auto* prop = get("property")) {
    size_t sep = prop->find_first_of(":=");
    if (sep == std::string::npos || sep == 0) {
      return Status::invalid_argument("property must be name:value, not '" + *prop + "'");
    }
    q.property_name = prop->substr(0, sep);
    q.property_value = prop->substr(sep + 1);
  }
  if (const auto* p = get("producer")) q.producer = *p;
  if (const auto* from = get("from")) {
    auto v = integer(*from, "from (ms since the epoch)");
    if (!v.is_ok()) return v.status();
    q.from_ms = *v;
  }
  if (const auto* to = get("to")) {
    auto v = integer(*to, "to (ms since the epoch)");
    if (!v.is_ok()) return v.status();
    q.to_ms = *v;
  }
  if (const auto* limit = get("limit")) {
    auto v = integer(*limit, "limit");
    if (!v.is_ok()) return v.status();
    if (*v < 1) return Status::invalid_argument("limit must be at least 1");
    q.limit = static_cast<size_t>(*v);
  }
  if (!q.position && q.key.empty() && q.property_name.empty() && q.producer.empty()) {
    return Status::invalid_argument("give messageId, key, property (name:value) or producer (with from and to)");
  }
  return q;
}

Json stage_json(const TraceEvent& e, int64_t received_ms) {
  Json j{{"stage", broker::trace_stage_name(e.stage)},
         {"time", e.time_ms},
         {"isoTime", iso_time(e.time_ms)},
         {"latencyMs", e.time_ms - received_ms}};
  if (e.range) {
    j["after"] = e.after.to_string();
    j["through"] = e.position.to_string();
  }
  if (e.batch_index >= 0) j["batchIndex"] = e.batch_index;
  if (!e.producer.empty()) j["producer"] = e.producer;
  if (!e.subscription.empty()) {
    j["subscription"] = e.subscription;
    j["consumerId"] = e.consumer_id;
  }
  if (!e.consumer_name.empty()) j["consumer"] = e.consumer_name;
  if (!e.client_address.empty()) j["clientAddress"] = e.client_address;
  if (!e.protocol.empty()) j["protocol"] = e.protocol;
  if (e.stage == broker::TraceStage::kDispatched) j["redeliveryCount"] = e.redelivery_count;
  if (!e.detail.empty()) j["detail"] = e.detail;
  return j;
}

Json message_json(const broker::MessageTrace& m) {
  const TraceEvent& r = m.received;
  Json messages = Json::array();
  std::string traceparent;
  for (const auto& msg : r.messages) {
    Json props = Json::object();
    for (const auto& [k, v] : msg.properties) {
      props[k] = v;
      if (k == "traceparent" && traceparent.empty()) traceparent = v;
    }
    Json one{{"properties", props}};
    one["key"] = msg.key.empty() ? Json(nullptr) : Json(msg.key);
    messages.push_back(std::move(one));
  }
  // The matched message's own traceparent wins over its batch's first.
  if (m.batch_index >= 0 && static_cast<size_t>(m.batch_index) < r.messages.size()) {
    for (const auto& [k, v] : r.messages[m.batch_index].properties) {
      if (k == "traceparent") traceparent = v;
    }
  }
  Json stages = Json::array();
  for (const auto& e : m.stages) stages.push_back(stage_json(e, r.time_ms));
  Json j{{"messageId", m.position.to_string()},
         {"producer", r.producer},
         {"sequenceId", r.sequence_id},
         {"receivedAt", iso_time(r.time_ms)},
         {"messages", messages},
         {"stages", stages}};
  if (m.batch_index >= 0) j["batchIndex"] = m.batch_index;
  j["traceparent"] = traceparent.empty() ? Json(nullptr) : Json(traceparent);
  return j;
}

}  // namespace

void register_trace_routes(Router& router, TopicServices& services) {
  TopicServices* s = &services;
  for (TopicDomain d : {TopicDomain::kPersistent, TopicDomain::kNonPersistent}) {
    const std::string topic = "/admin/v2/" + std::string(broker::domain_name(d)) + "/{tenant}/{namespace}/{topic}";
    router.get(topic + "/trace", [s, d](HttpRequest& req, Responder respond) {
      auto name = route_topic(d, req);
      if (!name.is_ok()) return respond(error_response(name.status()));
      auto q = query_of(req);
      if (!q.is_ok()) return respond(error_response(q.status()));
      std::string asked = q->describe();
      auto shared = std::make_shared<Responder>(std::move(respond));
      s->broker.find_traces(*name, std::move(q).value(),
                            [shared, asked, topic = name->to_string()](Result<broker::TraceAnswer> a) {
                              if (!a.is_ok()) return (*shared)(error_response(a.status()));
                              if (a->messages.empty()) {
                                std::string reason = "No traced message with " + asked + " on " + topic +
                                                     ": it was never produced, or not while tracing was on "
                                                     "(tracing is " +
                                                     std::string(broker::trace_mode_name(a->mode)) +
                                                     " for its namespace now)";
                                return (*shared)(HttpResponse::error(404, reason));
                              }
                              Json messages = Json::array();
                              for (const auto& m : a->messages) messages.push_back(message_json(m));
                              (*shared)(HttpResponse::json(200, Json{{"topic", topic},
                                                                     {"tracing", broker::trace_mode_name(a->mode)},
                                                                     {"truncated", a->truncated},
                                                                     {"eventsScanned", a->events_scanned},
                                                                     {"messages", messages}}));
                            });
    });
  }
}

}  // namespace magnetar::admin
