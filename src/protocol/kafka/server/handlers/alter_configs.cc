// AlterConfigs and IncrementalAlterConfigs: topic configs onto the topic's
// own policies (topic_configs.h), on the tenancy thread.
//
// Of what Kafka stores per topic, only retention.ms and retention.bytes
// change anything here: together they are the topic's retention policy. A
// field the request leaves at its default (AlterConfigs: not named, as it
// replaces the whole set; IncrementalAlterConfigs: DELETE) takes the value
// the topic would have without its own policy (its namespace's, else the
// node's default for the protocol that made it); with both at their
// default the topic's retention policy is removed. cleanup.policy,
// delete.retention.ms and min.compaction.lag.ms are the topic's compaction
// policies (APPEND and SUBTRACT edit cleanup.policy's items); the storage
// hints are accepted with no effect; other names are INVALID_CONFIG. Broker
// configs are set by the node's flags: altering them is INVALID_REQUEST.
// ValidateOnly checks everything and writes nothing.
#include <fmt/format.h>

#include "broker/retention.h"
#include "broker/tenancy.h"
#include "protocol/kafka/server/kafka_connection.h"
#include "protocol/kafka/server/topic_configs.h"

namespace magnetar::protocol::kafka {

using common::Status;

namespace {

constexpr int8_t kTopicConfigResource = 2;
constexpr int8_t kBrokerConfigResource = 4;
// IncrementalAlterConfigs' operations.
constexpr int8_t kOpSet = 0;
constexpr int8_t kOpDelete = 1;
constexpr int8_t kOpAppend = 2;
constexpr int8_t kOpSubtract = 3;

struct ConfigChange {
  std::string name;
  int8_t op = kOpSet;
  std::optional<std::string> value;
};

struct ResourceChange {
  int8_t type = 0;
  std::string name;
  std::vector<ConfigChange> configs;
  ErrorCode error = kNone;
  std::string message;
};

std::vector<ResourceChange> read_request(const Request& request, bool incremental) {
  std::vector<ResourceChange> out;
  for (const Struct& r : request.body.array("Resources")) {
    ResourceChange& change = out.emplace_back();
    change.type = static_cast<int8_t>(r.i("ResourceType"));
    change.name = r.str("ResourceName");
    for (const Struct& config : r.array("Configs")) {
      ConfigChange& c = change.configs.emplace_back();
      c.name = config.str("Name");
      c.op = incremental ? static_cast<int8_t>(config.i("ConfigOperation")) : kOpSet;
      if (!config.is_null("Value")) c.value = config.str("Value");
    }
  }
  return out;
}

// Applies one config change to `asked`; INVALID_CONFIG's reason when it
// cannot be had.
Status apply_change(const ConfigChange& c, RetentionAsked& asked, CompactionConfigs& compaction) {
  if (!is_known_topic_config(c.name)) {
    return Status::invalid_argument("unknown or unsupported topic config '" + c.name + "'");
  }
  if (is_compaction_config(c.name)) {
    switch (c.op) {
      case kOpSet: return set_compaction_config(c.name, c.value, compaction);
      case kOpDelete: return set_compaction_config(c.name, std::nullopt, compaction);
      case kOpAppend:
      case kOpSubtract:
        if (!is_list_topic_config(c.name)) {
          return Status::invalid_argument(fmt::format("'{}' is not a list config", c.name));
        }
        return edit_cleanup_policy(c.op == kOpAppend, c.value.value_or(""), compaction);
      default: return Status::invalid_argument(fmt::format("unknown config operation {}", c.op));
    }
  }
  switch (c.op) {
    case kOpSet: {
      auto applied = apply_topic_config(c.name, c.value, broker::RetentionPolicy{});
      if (!applied.is_ok()) return applied.status();
      if (c.name == "retention.ms") {
        asked.time_set = true;
        asked.time_minutes = (*applied)->time_minutes;
      }
      if (c.name == "retention.bytes") {
        asked.size_set = true;
        asked.size_mb = (*applied)->size_mb;
      }
      return Status::ok();
    }
    case kOpDelete:
      if (c.name == "retention.ms") asked.time_set = false;
      if (c.name == "retention.bytes") asked.size_set = false;
      return Status::ok();
    case kOpAppend:
    case kOpSubtract: return Status::invalid_argument(fmt::format("'{}' is not a list config", c.name));
    default: return Status::invalid_argument(fmt::format("unknown config operation {}", c.op));
  }
}

// Tenancy thread: one topic resource.
void alter_topic(broker::Tenancy& tenancy, KafkaService& service, const broker::NamespaceName& ns, bool incremental,
                 bool validate_only, ResourceChange& r) {
  auto fail = [&r](ErrorCode e, std::string why) {
    r.error = e;
    r.message = std::move(why);
  };
  auto topic = service.topic_for(ns, r.name);
  if (!topic) return fail(kInvalidTopic, topic.status().message());
  auto partitions = tenancy.get_partitions(*topic);
  if (!partitions.is_ok() || (*partitions == 0 && !tenancy.require_topic(*topic).is_ok())) {
    return fail(kUnknownTopicOrPartition, fmt::format("topic '{}' does not exist", r.name));
  }
  auto own = tenancy.get_topic_policies(*topic);
  if (!own.is_ok()) return fail(error_code(own.status()), own.status().message());
  RetentionAsked asked;
  if (incremental && own->retention) asked = {true, own->retention->time_minutes, true, own->retention->size_mb};
  // AlterConfigs replaces the whole set: a compaction config not named goes.
  const CompactionConfigs own_compaction = CompactionConfigs::of(*own);
  CompactionConfigs compaction = incremental ? own_compaction : CompactionConfigs{};
  for (const ConfigChange& c : r.configs) {
    if (Status st = apply_change(c, asked, compaction); !st.is_ok()) return fail(kInvalidConfig, st.message());
  }
  if (validate_only) return;
  if (compaction != own_compaction) {
    Status st = tenancy.update_topic_policies(*topic, [&](broker::NamespacePolicies& p) {
      compaction.store(p);
      return Status::ok();
    });
    if (!st.is_ok()) return fail(error_code(st), st.message());
  }
  std::optional<broker::RetentionPolicy> policy;
  if (asked.any()) {
    auto wanted = retention_policy_for(tenancy, *topic, asked);
    if (!wanted.is_ok()) return fail(error_code(wanted.status()), wanted.status().message());
    policy = *wanted;
  }
  if (policy == own->retention) return;
  Status st = tenancy.update_topic_policies(*topic, [&](broker::NamespacePolicies& p) {
    p.retention = policy;
    return Status::ok();
  });
  if (!st.is_ok()) fail(error_code(st), st.message());
}

void answer_alter(KafkaConnection& c, const Request& request, const std::vector<ResourceChange>& results) {
  Struct resp = request.response();
  resp.set("ThrottleTimeMs", int64_t{0});
  for (const ResourceChange& r : results) {
    auto& out = resp.add("Responses");
    out.set("ErrorCode", int64_t{r.error});
    if (r.error != kNone) out.set("ErrorMessage", r.message);
    out.set("ResourceType", int64_t{r.type});
    out.set("ResourceName", r.name);
  }
  c.respond(request, resp);
}

void alter_configs(KafkaConnection& c, const Request& request, bool incremental) {
  std::vector<ResourceChange> results = read_request(request, incremental);
  const Status allowed = may_administer(c);
  broker::Tenancy* tenancy = c.service().tenancy();
  for (ResourceChange& r : results) {
    if (r.type == kBrokerConfigResource) {
      r.error = kInvalidRequest;
      r.message = "broker configs are set by the node's flags";
    } else if (r.type != kTopicConfigResource) {
      r.error = kInvalidRequest;
      r.message = fmt::format("resource type {} is not served (topics: 2)", r.type);
    } else if (!allowed.is_ok()) {
      r.error = kTopicAuthorizationFailed;
      r.message = allowed.message();
    } else if (tenancy == nullptr) {
      r.error = kInvalidRequest;
      r.message = "topic configs need the metadata service";
    }
  }
  const bool validate_only = request.body.i("ValidateOnly") != 0;
  if (tenancy == nullptr) return answer_alter(c, request, results);
  Status st = tenancy->submit([tenancy, service = &c.service(), ns = c.ns(), request, incremental, validate_only,
                               results, reply = c.replier()]() mutable {
    for (ResourceChange& r : results) {
      if (r.error == kNone) alter_topic(*tenancy, *service, ns, incremental, validate_only, r);
    }
    reply([request, results = std::move(results)](KafkaConnection& conn) { answer_alter(conn, request, results); });
  });
  if (!st.is_ok()) {
    for (ResourceChange& r : results) {
      if (r.error != kNone) continue;
      r.error = error_code(st);
      r.message = st.message();
    }
    answer_alter(c, request, results);
  }
}

}  // namespace

void handle_alter_configs(KafkaConnection& c, const Request& request) { alter_configs(c, request, false); }

void handle_incremental_alter_configs(KafkaConnection& c, const Request& request) {
  alter_configs(c, request, true);
}

}  // namespace magnetar::protocol::kafka
