#include "protocol/kafka/server/topic_configs.h"

#include <cstdlib>
#include <set>

namespace magnetar::protocol::kafka {

using common::Status;

namespace {

constexpr int64_t kBytesPerMiB = 1024 * 1024;

// Storage tuning Kafka clients like to pass: accepted, no effect here.
const std::set<std::string>& accepted_hints() {
  static const std::set<std::string> kHints = {
      "segment.bytes",          "segment.ms",        "segment.index.bytes",
      "segment.jitter.ms",      "min.insync.replicas", "flush.messages",
      "flush.ms",               "index.interval.bytes", "preallocate",
      "unclean.leader.election.enable", "compression.type", "file.delete.delay.ms",
      "message.timestamp.type", "max.message.bytes", "min.cleanable.dirty.ratio"};
  return kHints;
}

}  // namespace

common::Result<std::optional<broker::RetentionPolicy>> apply_topic_config(const std::string& name,
                                                                         const std::optional<std::string>& value,
                                                                         broker::RetentionPolicy retention) {
  auto number = [&](int64_t* out) {
    if (!value) return false;
    char* end = nullptr;
    long long v = std::strtoll(value->c_str(), &end, 10);
    if (value->empty() || end == nullptr || *end != '\0') return false;
    *out = v;
    return true;
  };
  if (name == "retention.ms") {
    int64_t ms = 0;
    if (!number(&ms) || ms < -1) return Status::invalid_argument("retention.ms must be -1 or a number of milliseconds");
    retention.time_minutes = ms < 0 ? -1 : (ms + 59999) / 60000;
    return std::optional<broker::RetentionPolicy>(retention);
  }
  if (name == "retention.bytes") {
    int64_t bytes = 0;
    if (!number(&bytes) || bytes < -1) {
      return Status::invalid_argument("retention.bytes must be -1 or a number of bytes");
    }
    retention.size_mb = bytes < 0 ? -1 : (bytes + kBytesPerMiB - 1) / kBytesPerMiB;
    return std::optional<broker::RetentionPolicy>(retention);
  }
  if (is_compaction_config(name)) {
    CompactionConfigs check;
    MAGNETAR_RETURN_IF_ERROR(set_compaction_config(name, value, check));
    return std::optional<broker::RetentionPolicy>();
  }
  if (accepted_hints().count(name) > 0) {
    if (name == "message.timestamp.type" && value && *value != "CreateTime") {
      return Status::invalid_argument("message.timestamp.type: only CreateTime is served");
    }
    return std::optional<broker::RetentionPolicy>();
  }
  return Status::invalid_argument("unknown or unsupported topic config '" + name + "'");
}

common::Result<broker::RetentionPolicy> retention_policy_for(broker::Tenancy& tenancy, const broker::TopicName& topic,
                                                             const RetentionAsked& asked,
                                                             std::optional<broker::TopicOrigin> origin) {
  auto ns_policies = tenancy.get_policies(topic.ns);
  if (!ns_policies.is_ok()) return ns_policies.status();
  if (!origin) {
    auto recorded = tenancy.topic_origin(topic);
    if (!recorded.is_ok()) return recorded.status();
    origin = *recorded;
  }
  const auto fallback = broker::retention_in_effect(topic, *ns_policies, false, *origin, tenancy.retention_defaults());
  const int64_t minutes = fallback.time_ms <= 0 ? -1 : (fallback.time_ms + 59999) / 60000;
  const int64_t mb = fallback.size_bytes <= 0 ? -1 : (fallback.size_bytes + kBytesPerMiB - 1) / kBytesPerMiB;
  return broker::RetentionPolicy{asked.time_set ? asked.time_minutes : minutes, asked.size_set ? asked.size_mb : mb};
}

bool is_compaction_config(const std::string& name) {
  return name == "cleanup.policy" || name == "delete.retention.ms" || name == "min.compaction.lag.ms";
}

common::Status set_compaction_config(const std::string& name, const std::optional<std::string>& value,
                                     CompactionConfigs& configs) {
  if (name == "cleanup.policy") {
    if (!value) {
      configs.cleanup.reset();
      return Status::ok();
    }
    std::string items;  // without spaces: "compact, delete" is Kafka's too
    for (char ch : *value) {
      if (ch != ' ') items.push_back(ch);
    }
    auto policy = broker::parse_cleanup_policy(items);
    if (!policy.is_ok()) return Status::invalid_argument("cleanup.policy: " + policy.status().message());
    configs.cleanup = *policy;
    return Status::ok();
  }
  std::optional<int64_t>& field =
      name == "delete.retention.ms" ? configs.delete_retention_ms : configs.min_compaction_lag_ms;
  if (!value) {
    field.reset();
    return Status::ok();
  }
  char* end = nullptr;
  long long v = std::strtoll(value->c_str(), &end, 10);
  if (value->empty() || end == nullptr || *end != '\0' || v < 0) {
    return Status::invalid_argument(name + " must be a number of milliseconds, at least 0");
  }
  field = v;
  return Status::ok();
}

common::Status edit_cleanup_policy(bool append, const std::string& items, CompactionConfigs& configs) {
  const broker::CleanupPolicy now = configs.cleanup.value_or(broker::CleanupPolicy::kDelete);
  bool compact = now != broker::CleanupPolicy::kDelete;
  bool del = now != broker::CleanupPolicy::kCompact;
  size_t start = 0;
  while (start <= items.size()) {
    size_t comma = items.find(',', start);
    std::string item = items.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item == "compact") {
      compact = append;
    } else if (item == "delete") {
      del = append;
    } else {
      return Status::invalid_argument("cleanup.policy: unknown item '" + item + "': expected compact or delete");
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (!compact && !del) return Status::invalid_argument("cleanup.policy cannot be empty");
  configs.cleanup = compact && del ? broker::CleanupPolicy::kCompactDelete
                    : compact      ? broker::CleanupPolicy::kCompact
                                   : broker::CleanupPolicy::kDelete;
  return Status::ok();
}

bool is_known_topic_config(const std::string& name) {
  return name == "retention.ms" || name == "retention.bytes" || is_compaction_config(name) ||
         accepted_hints().count(name) > 0;
}

bool is_list_topic_config(const std::string& name) { return name == "cleanup.policy"; }

}  // namespace magnetar::protocol::kafka
