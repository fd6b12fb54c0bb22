// DescribeConfigs: a topic's configuration as Kafka names it, read from the
// policies that apply to it (its own overrides, else its namespace's), and a
// few broker settings. Resource types: 2 (topic) and 4 (broker); others are
// answered INVALID_REQUEST.
//
//   retention.ms / retention.bytes   the retention in effect (broker/retention.h;
//                                    Pulsar's policy is in minutes and MB; -1 =
//                                    unlimited). Its source: the topic's policy
//                                    DYNAMIC_TOPIC_CONFIG, the namespace's
//                                    DYNAMIC_DEFAULT_BROKER_CONFIG, the node's
//                                    Kafka default DEFAULT_CONFIG (or
//                                    STATIC_BROKER_CONFIG when set by flag).
//                                    A topic Pulsar made without a retention
//                                    policy says 0: its data goes once every
//                                    subscription has acknowledged it
//   magnetar.retention.source        where the retention comes from: topic,
//                                    namespace, kafka-default, pulsar-default
//   cleanup.policy                   delete, compact or compact,delete (the
//                                    topic's policy; default delete)
//   delete.retention.ms              how long tombstones stay in the
//                                    compacted view (default a day)
//   min.compaction.lag.ms            default 0
//   max.message.bytes                5 MiB, Pulsar's largest message
//   message.timestamp.type           CreateTime
//   min.insync.replicas              the persistence policy's ack quorum
//   message.ttl.ms (Magnetar's)      the namespace's message TTL
#include <algorithm>

#include <fmt/format.h>

#include "broker/policy_cache.h"
#include "broker/retention.h"
#include "broker/tenancy.h"
#include "protocol/kafka/server/kafka_connection.h"
#include "protocol/pulsar/frame.h"

namespace magnetar::protocol::kafka {

namespace {

constexpr int8_t kTopicResource = 2;
constexpr int8_t kBrokerResource = 4;
// ConfigSource values (KIP-226).
constexpr int8_t kDynamicTopicConfig = 1;
constexpr int8_t kDynamicDefaultBrokerConfig = 3;
constexpr int8_t kStaticBrokerConfig = 4;
constexpr int8_t kDefaultConfig = 5;

// ConfigType values (v3+, KIP-569).
constexpr int8_t kBooleanType = 1;
constexpr int8_t kStringType = 2;
constexpr int8_t kIntType = 3;
constexpr int8_t kLongType = 5;
constexpr int8_t kListType = 7;

struct ConfigEntry {
  std::string name;
  std::string value;
  int8_t source = kDefaultConfig;
  bool read_only = true;
  int8_t type = kStringType;
};

struct ResourceResult {
  int8_t type = 0;
  std::string name;
  ErrorCode error = kNone;
  std::string message;
  std::vector<ConfigEntry> configs;
};

int8_t config_source(broker::RetentionSource s, bool kafka_configured) {
  switch (s) {
    case broker::RetentionSource::kTopic: return kDynamicTopicConfig;
    case broker::RetentionSource::kNamespace: return kDynamicDefaultBrokerConfig;
    case broker::RetentionSource::kKafkaDefault: return kafka_configured ? kStaticBrokerConfig : kDefaultConfig;
    default: return kDefaultConfig;
  }
}

std::vector<ConfigEntry> topic_configs(const broker::NamespacePolicies& policies, const broker::RetentionInEffect& r,
                                       bool kafka_configured) {
  std::vector<ConfigEntry> out;
  const int8_t retention_source = config_source(r.source, kafka_configured);
  out.push_back({"retention.ms", std::to_string(r.time_ms), retention_source, false, kLongType});
  out.push_back({"retention.bytes", std::to_string(r.size_bytes), retention_source, false, kLongType});
  out.push_back({"magnetar.retention.source", std::string(broker::retention_source_name(r.source)), retention_source,
                 true});
  auto own = [](bool set) { return set ? kDynamicTopicConfig : kDefaultConfig; };
  const auto cleanup = policies.cleanup_policy.value_or(broker::CleanupPolicy::kDelete);
  out.push_back({"cleanup.policy", std::string(broker::cleanup_policy_name(cleanup)),
                 own(policies.cleanup_policy.has_value()), false, kListType});
  out.push_back({"delete.retention.ms", std::to_string(policies.delete_retention_ms.value_or(24 * 60 * 60 * 1000)),
                 own(policies.delete_retention_ms.has_value()), false, kLongType});
  out.push_back({"min.compaction.lag.ms", std::to_string(policies.min_compaction_lag_ms.value_or(0)),
                 own(policies.min_compaction_lag_ms.has_value()), false, kLongType});
  out.push_back({"max.message.bytes", std::to_string(pulsar::kDefaultMaxMessageSize), kStaticBrokerConfig, true,
                 kIntType});
  out.push_back({"message.timestamp.type", "CreateTime", kDefaultConfig, true});
  const int32_t ack_quorum = policies.persistence ? policies.persistence->ack_quorum : 1;
  out.push_back({"min.insync.replicas", std::to_string(ack_quorum),
                 policies.persistence ? kDynamicTopicConfig : kDefaultConfig, true, kIntType});
  if (policies.message_ttl_seconds) {
    out.push_back({"message.ttl.ms", std::to_string(int64_t{*policies.message_ttl_seconds} * 1000),
                   kDynamicTopicConfig, true, kLongType});
  }
  return out;
}

std::vector<ConfigEntry> broker_configs(KafkaService& service) {
  return {
      {"broker.id", "0", kStaticBrokerConfig, true, kIntType},
      {"auto.create.topics.enable", "true", kStaticBrokerConfig, true, kBooleanType},
      {"num.partitions", "1", kStaticBrokerConfig, true, kIntType},
      {"message.max.bytes", std::to_string(pulsar::kDefaultMaxMessageSize), kStaticBrokerConfig, true, kIntType},
      {"default.namespace", service.default_namespace().to_string(), kStaticBrokerConfig, true},
  };
}

void answer(KafkaConnection& c, const Request& request, const std::vector<ResourceResult>& results) {
  Struct resp = request.response();
  resp.set("ThrottleTimeMs", int64_t{0});
  const bool synonyms = request.body.i("IncludeSynonyms") != 0;
  const auto& resources = request.body.array("Resources");
  for (size_t k = 0; k < results.size(); ++k) {
    const ResourceResult& r = results[k];
    auto& out = resp.add("Results");
    out.set("ErrorCode", int64_t{r.error});
    if (r.error != kNone) out.set("ErrorMessage", r.message);
    out.set("ResourceType", int64_t{r.type});
    out.set("ResourceName", r.name);
    const auto& keys = resources[k].strings("ConfigurationKeys");
    const bool all = resources[k].is_null("ConfigurationKeys") || keys.empty();
    for (const ConfigEntry& e : r.configs) {
      if (!all && std::find(keys.begin(), keys.end(), e.name) == keys.end()) continue;
      auto& config = out.add("Configs");
      config.set("Name", e.name);
      config.set("Value", e.value);
      config.set("ReadOnly", int64_t{e.read_only});
      config.set("IsDefault", int64_t{e.source == kDefaultConfig});
      config.set("ConfigSource", int64_t{e.source});
      config.set("IsSensitive", int64_t{0});
      config.set("ConfigType", int64_t{e.type});  // v3+; Documentation stays null
      if (synonyms) {
        auto& s = config.add("Synonyms");
        s.set("Name", e.name);
        s.set("Value", e.value);
        s.set("Source", int64_t{e.source});
      }
    }
  }
  c.respond(request, resp);
}

}  // namespace

void handle_describe_configs(KafkaConnection& c, const Request& request) {
  std::vector<ResourceResult> results;
  for (const Struct& r : request.body.array("Resources")) {
    ResourceResult& out = results.emplace_back();
    out.type = static_cast<int8_t>(r.i("ResourceType"));
    out.name = r.str("ResourceName");
    if (out.type == kBrokerResource) {
      out.configs = broker_configs(c.service());
    } else if (out.type != kTopicResource) {
      out.error = kInvalidRequest;
      out.message = fmt::format("resource type {} is not served (topics: 2, brokers: 4)", out.type);
    }
  }
  broker::Tenancy* tenancy = c.service().tenancy();
  if (tenancy == nullptr) {
    for (auto& r : results) {
      if (r.type == kTopicResource) {
        r.error = kInvalidRequest;
        r.message = "topic configs need the metadata service";
      }
    }
    return answer(c, request, results);
  }
  for (auto& r : results) {
    if (r.type == kTopicResource && !c.authorize(r.name, broker::TopicAction::kLookup).is_ok()) {
      r.error = kTopicAuthorizationFailed;
      r.message = "not authorized to describe topic " + r.name;
    }
  }
  common::Status st = tenancy->submit([tenancy, service = &c.service(), ns = c.ns(), request, results,
                                       reply = c.replier()]() mutable {
    for (auto& r : results) {
      if (r.type != kTopicResource || r.error != kNone) continue;
      auto topic = service->topic_for(ns, r.name);
      if (!topic) {
        r.error = kInvalidTopic;
        r.message = topic.status().message();
        continue;
      }
      auto partitions = tenancy->get_partitions(*topic);
      if (!partitions.is_ok() || (*partitions == 0 && !tenancy->require_topic(*topic).is_ok())) {
        r.error = kUnknownTopicOrPartition;
        r.message = fmt::format("topic '{}' does not exist", r.name);
        continue;
      }
      auto retention = tenancy->retention_of(*topic);
      if (!retention.is_ok()) {
        r.error = error_code(retention.status());
        r.message = retention.status().message();
        continue;
      }
      auto effective = service->policies() ? service->policies()->effective(*topic) : std::nullopt;
      r.configs = topic_configs(effective.value_or(broker::NamespacePolicies{}), *retention,
                                tenancy->retention_defaults().kafka_configured);
    }
    reply([request, results = std::move(results)](KafkaConnection& conn) { answer(conn, request, results); });
  });
  if (!st.is_ok()) answer(c, request, results);
}

}  // namespace magnetar::protocol::kafka
