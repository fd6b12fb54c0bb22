// Pulsar's REST producer: POST /topics/{domain}/{tenant}/{namespace}/{topic}
// (and .../{topic}/partitions/{n}) with a ProducerMessages body
//   {"producerName": "...", "messages": [{"payload": "text", "key": "k",
//     "properties": {"a": "b"}, "eventTime": ms, "sequenceId": n}, ...]}
// stores each message as one entry, in order, as a Pulsar client's SEND
// would, and answers {"messagePublishResults": [{"messageId": "L:E:-1",
// "errorCode": 0, "schemaVersion": 0}, ...], "schemaVersion": 0}. Payloads
// are strings (no schema). The topic must exist; a partitioned topic takes
// messages through its partitions.
#include <atomic>
#include <chrono>
#include <mutex>

#include <fmt/format.h>

#include "common/clock.h"
#include "admin/handlers.h"
#include "admin/handlers/policy_json.h"
#include "admin/handlers/tenancy_common.h"
#include "admin/handlers/topic_common.h"
#include "protocol/pulsar/frame.h"

namespace magnetar::admin {

namespace {

using broker::Topic;
using broker::TopicDomain;
using common::Result;
namespace proto = protocol::pulsar::proto;

// Messages one request may carry.
constexpr size_t kMaxMessages = 1000;
// Producer ids of REST requests: far above the ids the protocol listeners
// hand out (they count from 1), so the two never meet on a topic.
std::atomic<uint64_t> next_rest_producer{uint64_t{1} << 62};

struct Outgoing {
  ledger::MessageHeader header;
  common::Slice entry;
};

// Validates the body and builds the entries; InvalidArgument with a reason
// a user can act on otherwise.
Result<std::vector<Outgoing>> build_entries(const Json& body, const std::string& producer_name) {
  if (!body.is_object()) return common::Status::invalid_argument("the body must be a ProducerMessages object");
  auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array() || messages->empty()) {
    return common::Status::invalid_argument("'messages' must be a non-empty array");
  }
  if (messages->size() > kMaxMessages) {
    return common::Status::invalid_argument(fmt::format("at most {} messages per request", kMaxMessages));
  }
  int64_t now = common::wall_clock_ms();
  std::vector<Outgoing> out;
  uint64_t sequence = 0;
  for (const Json& m : *messages) {
    if (!m.is_object()) return common::Status::invalid_argument("each message must be an object");
    auto payload = m.find("payload");
    if (payload == m.end() || !payload->is_string()) {
      return common::Status::invalid_argument("each message needs a string 'payload'");
    }
    proto::MessageMetadata md;
    md.set_producer_name(producer_name);
    if (m.contains("sequenceId")) {
      if (!m["sequenceId"].is_number_integer() || m["sequenceId"].get<int64_t>() < 0) {
        return common::Status::invalid_argument("'sequenceId' must be a non-negative integer");
      }
      sequence = m["sequenceId"].get<uint64_t>();
    }
    md.set_sequence_id(sequence++);
    md.set_publish_time(static_cast<uint64_t>(now));
    Outgoing o;
    o.header.publish_time_ms = now;
    o.header.producer = producer_name;
    o.header.sequence_id = static_cast<int64_t>(md.sequence_id());
    if (auto key = m.find("key"); key != m.end() && !key->is_null()) {
      if (!key->is_string()) return common::Status::invalid_argument("'key' must be a string");
      md.set_partition_key(key->get<std::string>());
      o.header.key = md.partition_key();
    }
    if (auto props = m.find("properties"); props != m.end() && !props->is_null()) {
      if (!props->is_object()) return common::Status::invalid_argument("'properties' must be an object of strings");
      for (const auto& [k, v] : props->items()) {
        if (!v.is_string()) return common::Status::invalid_argument("property '" + k + "' must be a string");
        auto* kv = md.add_properties();
        kv->set_key(k);
        kv->set_value(v.get<std::string>());
      }
    }
    if (auto event = m.find("eventTime"); event != m.end() && !event->is_null()) {
      if (!event->is_number_integer() || event->get<int64_t>() < 0) {
        return common::Status::invalid_argument("'eventTime' must be milliseconds since the epoch");
      }
      md.set_event_time(event->get<uint64_t>());
    }
    o.entry = protocol::pulsar::encode_entry(md, payload->get_ref<const std::string&>());
    out.push_back(std::move(o));
  }
  return out;
}

// The answers of one request, filled as the entries are stored.
// The answers of one request, filled as the entries are stored (from
// whichever thread completes them).
struct Publishing {
  std::mutex mu;
  SharedResponder respond;
  std::vector<Json> results;
  size_t pending = 0;
};

void produce(TopicServices& services, TopicDomain domain, HttpRequest& req, Responder respond) {
  auto body = parse_json_body(req.body);
  if (!body.is_ok()) return respond(error_response(body.status()));
  uint64_t id = next_rest_producer.fetch_add(1, std::memory_order_relaxed);
  std::string name = fmt::format("{}-rest-{}", services.tenancy.local_cluster(), id - (uint64_t{1} << 62));
  if (body->is_object() && body->contains("producerName")) {
    const Json& n = (*body)["producerName"];
    if (!n.is_string() || n.get<std::string>().empty()) {
      return respond(HttpResponse::error(400, "'producerName' must be a non-empty string"));
    }
    name = n.get<std::string>();
  }
  auto entries = build_entries(*body, name);
  if (!entries.is_ok()) return respond(error_response(entries.status()));
  on_existing_topic(services, domain, req, std::move(respond),
                    [&services, id, name, entries = std::make_shared<std::vector<Outgoing>>(std::move(*entries))](
                        Topic& t, SharedResponder r) {
    common::Status admitted = t.add_producer(id, name);
    if (!admitted.is_ok()) return (*r)(error_response(admitted));
    auto state = std::make_shared<Publishing>();
    state->respond = r;
    state->results.resize(entries->size());
    state->pending = entries->size();
    for (size_t i = 0; i < entries->size(); ++i) {
      Outgoing& o = (*entries)[i];
      t.publish(id, std::move(o.header), std::move(o.entry),
                [&services, state, i, id, topic = t.name()](Result<ledger::Position> stored) {
                  std::lock_guard<std::mutex> lock(state->mu);
                  if (stored.is_ok()) {
                    state->results[i] = {{"messageId", fmt::format("{}:{}:-1", stored->ledger, stored->entry)},
                                         {"errorCode", 0},
                                         {"schemaVersion", 0}};
                  } else {
                    state->results[i] = {{"messageId", ""}, {"errorCode", 2}, {"error", stored.status().message()},
                                         {"schemaVersion", 0}};
                  }
                  if (--state->pending > 0) return;
                  services.broker.with_topic(topic, [id](Result<Topic*> loaded) {
                    if (loaded.is_ok()) (*loaded)->remove_producer(id);
                  });
                  (*state->respond)(HttpResponse::json(
                      200, Json{{"messagePublishResults", state->results}, {"schemaVersion", 0}}));
                });
    }
  });
}

}  // namespace

void register_rest_producer_routes(Router& router, TopicServices& services) {
  for (TopicDomain d : {TopicDomain::kPersistent, TopicDomain::kNonPersistent}) {
    std::string base = std::string("/topics/") + std::string(broker::domain_name(d)) + "/{tenant}/{namespace}/{topic}";
    router.post(base, [s = &services, d](HttpRequest& req, Responder respond) { produce(*s, d, req, std::move(respond)); });
    router.post(base + "/partitions/{partition}", [s = &services, d](HttpRequest& req, Responder respond) {
      const std::string& n = req.param("partition");
      if (n.empty() || n.size() > 5 || n.find_first_not_of("0123456789") != std::string::npos) {
        return respond(HttpResponse::error(400, "the partition must be a number"));
      }
      req.params["topic"] = req.param("topic") + "-partition-" + n;
      produce(*s, d, req, std::move(respond));
    });
  }
}

}  // namespace magnetar::admin
