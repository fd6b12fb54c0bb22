#include "broker/policies.h"

#include <cmath>

#include "broker/naming.h"

namespace magnetar::broker {

using common::Result;
using common::Status;

std::string_view backlog_action_name(BacklogQuotaAction a) {
  switch (a) {
    case BacklogQuotaAction::kProducerRequestHold: return "producer_request_hold";
    case BacklogQuotaAction::kProducerException: return "producer_exception";
    case BacklogQuotaAction::kConsumerBacklogEviction: return "consumer_backlog_eviction";
  }
  return "producer_request_hold";
}

Result<BacklogQuotaAction> parse_backlog_action(std::string_view s) {
  if (s == "producer_request_hold") return BacklogQuotaAction::kProducerRequestHold;
  if (s == "producer_exception") return BacklogQuotaAction::kProducerException;
  if (s == "consumer_backlog_eviction") return BacklogQuotaAction::kConsumerBacklogEviction;
  return Status::invalid_argument("invalid backlog quota policy '" + std::string(s) +
                                  "': expected producer_request_hold, producer_exception or "
                                  "consumer_backlog_eviction");
}

std::string_view fsync_mode_name(FsyncMode m) {
  switch (m) {
    case FsyncMode::kAlways: return "always";
    case FsyncMode::kInterval: return "interval";
    case FsyncMode::kNever: return "never";
  }
  return "always";
}

Result<FsyncMode> parse_fsync_mode(std::string_view s) {
  if (s == "always") return FsyncMode::kAlways;
  if (s == "interval") return FsyncMode::kInterval;
  if (s == "never") return FsyncMode::kNever;
  return Status::invalid_argument("invalid fsync mode '" + std::string(s) +
                                  "': expected always, interval or never");
}

std::string_view trace_mode_name(TraceMode m) {
  switch (m) {
    case TraceMode::kOff: return "off";
    case TraceMode::kSampled: return "sampled";
    case TraceMode::kAll: return "all";
  }
  return "off";
}

Result<TraceMode> parse_trace_mode(std::string_view s) {
  if (s == "off") return TraceMode::kOff;
  if (s == "sampled") return TraceMode::kSampled;
  if (s == "all") return TraceMode::kAll;
  return Status::invalid_argument("invalid tracing mode '" + std::string(s) + "': expected off, sampled or all");
}

std::string_view subscription_auth_mode_name(SubscriptionAuthMode m) {
  return m == SubscriptionAuthMode::kPrefix ? "Prefix" : "None";
}

Result<SubscriptionAuthMode> parse_subscription_auth_mode(std::string_view s) {
  if (s == "None") return SubscriptionAuthMode::kNone;
  if (s == "Prefix") return SubscriptionAuthMode::kPrefix;
  return Status::invalid_argument("invalid subscription auth mode '" + std::string(s) + "': expected None or Prefix");
}

std::string_view cleanup_policy_name(CleanupPolicy p) {
  switch (p) {
    case CleanupPolicy::kCompact:
      return "compact";
    case CleanupPolicy::kCompactDelete:
      return "compact,delete";
    case CleanupPolicy::kDelete:
      break;
  }
  return "delete";
}

Result<CleanupPolicy> parse_cleanup_policy(std::string_view s) {
  if (s == "delete") return CleanupPolicy::kDelete;
  if (s == "compact") return CleanupPolicy::kCompact;
  if (s == "compact,delete" || s == "delete,compact") return CleanupPolicy::kCompactDelete;
  return Status::invalid_argument("invalid cleanup policy '" + std::string(s) +
                                  "': expected delete, compact or compact,delete");
}

bool is_auth_action(std::string_view s) {
  for (auto a : kAuthActions) {
    if (a == s) return true;
  }
  return false;
}

namespace {

Status at_least(int64_t v, int64_t min, std::string_view what) {
  if (v < min) {
    return Status::invalid_argument(std::string(what) + " must be at least " + std::to_string(min) + ", not " +
                                    std::to_string(v));
  }
  return Status::ok();
}

}  // namespace

Status validate(const RetentionPolicy& p) {
  MAGNETAR_RETURN_IF_ERROR(at_least(p.time_minutes, -1, "retentionTimeInMinutes"));
  MAGNETAR_RETURN_IF_ERROR(at_least(p.size_mb, -1, "retentionSizeInMB"));
  // Pulsar's rule: keeping by size but not by time (or the reverse) with the
  // other at 0 would keep nothing and is almost certainly a mistake.
  if ((p.time_minutes == 0) != (p.size_mb == 0)) {
    return Status::invalid_argument(
        "retentionTimeInMinutes and retentionSizeInMB must both be 0 (no retention) or both be non-zero");
  }
  return Status::ok();
}

Status validate(const BacklogQuota& p) {
  MAGNETAR_RETURN_IF_ERROR(at_least(p.limit_size, -1, "limitSize"));
  return at_least(p.limit_time, -1, "limitTime");
}

Status validate(const PersistencePolicy& p) {
  MAGNETAR_RETURN_IF_ERROR(at_least(p.ensemble, 1, "bookkeeperEnsemble"));
  MAGNETAR_RETURN_IF_ERROR(at_least(p.write_quorum, 1, "bookkeeperWriteQuorum"));
  MAGNETAR_RETURN_IF_ERROR(at_least(p.ack_quorum, 1, "bookkeeperAckQuorum"));
  if (!(p.ensemble >= p.write_quorum && p.write_quorum >= p.ack_quorum)) {
    return Status::invalid_argument(
        "persistence needs bookkeeperEnsemble >= bookkeeperWriteQuorum >= bookkeeperAckQuorum");
  }
  if (!std::isfinite(p.max_mark_delete_rate) || p.max_mark_delete_rate < 0) {
    return Status::invalid_argument("managedLedgerMaxMarkDeleteRate must be a number >= 0");
  }
  if (p.fsync_mode == FsyncMode::kInterval && p.fsync_interval_ms < 1) {
    return Status::invalid_argument("fsyncMode 'interval' needs fsyncIntervalMs >= 1");
  }
  return at_least(p.fsync_interval_ms, 0, "fsyncIntervalMs");
}

Status validate(const PublishRate& p) {
  MAGNETAR_RETURN_IF_ERROR(at_least(p.msgs_per_second, -1, "publishThrottlingRateInMsg"));
  return at_least(p.bytes_per_second, -1, "publishThrottlingRateInByte");
}

Status validate(const TenantLimits& p) {
  MAGNETAR_RETURN_IF_ERROR(at_least(p.publish_msgs_per_second, -1, "publishThrottlingRateInMsg"));
  MAGNETAR_RETURN_IF_ERROR(at_least(p.max_producers, -1, "maxProducers"));
  MAGNETAR_RETURN_IF_ERROR(at_least(p.max_consumers, -1, "maxConsumers"));
  MAGNETAR_RETURN_IF_ERROR(at_least(p.max_connections, -1, "maxConnections"));
  MAGNETAR_RETURN_IF_ERROR(at_least(p.max_topics, -1, "maxTopics"));
  MAGNETAR_RETURN_IF_ERROR(at_least(p.max_subscriptions, -1, "maxSubscriptions"));
  MAGNETAR_RETURN_IF_ERROR(at_least(p.storage_quota_bytes, -1, "storageQuotaBytes"));
  MAGNETAR_RETURN_IF_ERROR(at_least(p.dispatch_msgs_per_second, -1, "dispatchThrottlingRateInMsg"));
  MAGNETAR_RETURN_IF_ERROR(at_least(p.dispatch_bytes_per_second, -1, "dispatchThrottlingRateInByte"));
  MAGNETAR_RETURN_IF_ERROR(at_least(p.max_namespaces, -1, "maxNamespaces"));
  MAGNETAR_RETURN_IF_ERROR(at_least(p.max_message_bytes, -1, "maxMessageSize"));
  return at_least(p.publish_bytes_per_second, -1, "publishThrottlingRateInByte");
}

Status validate(const DispatchRate& p) {
  MAGNETAR_RETURN_IF_ERROR(at_least(p.msgs_per_period, -1, "dispatchThrottlingRateInMsg"));
  MAGNETAR_RETURN_IF_ERROR(at_least(p.bytes_per_period, -1, "dispatchThrottlingRateInByte"));
  return at_least(p.period_seconds, 1, "ratePeriodInSecond");
}

Status validate(const AutoTopicCreation& p) {
  if (p.partitioned && p.allow && p.default_partitions < 1) {
    return Status::invalid_argument("topicType 'partitioned' needs defaultNumPartitions >= 1");
  }
  if (!p.partitioned && p.default_partitions != 0) {
    return Status::invalid_argument("defaultNumPartitions applies only to topicType 'partitioned'");
  }
  return at_least(p.default_partitions, 0, "defaultNumPartitions");
}

Status validate(const TracingPolicy& p) {
  if (p.mode == TraceMode::kSampled && !(std::isfinite(p.rate) && p.rate > 0 && p.rate <= 1)) {
    return Status::invalid_argument("tracing mode 'sampled' needs a rate above 0 and at most 1");
  }
  MAGNETAR_RETURN_IF_ERROR(at_least(p.retention_minutes, -1, "retentionTimeInMinutes"));
  MAGNETAR_RETURN_IF_ERROR(at_least(p.retention_size_mb, -1, "retentionSizeInMB"));
  if (p.retention_minutes == 0 || p.retention_size_mb == 0) {
    return Status::invalid_argument("traces need a retention: retentionTimeInMinutes and retentionSizeInMB "
                                    "must not be 0");
  }
  return Status::ok();
}

Status validate(const NamespacePolicies& p) {
  if (p.retention) MAGNETAR_RETURN_IF_ERROR(validate(*p.retention));
  if (p.message_ttl_seconds) MAGNETAR_RETURN_IF_ERROR(at_least(*p.message_ttl_seconds, 0, "messageTTL"));
  if (p.backlog_quota_size) MAGNETAR_RETURN_IF_ERROR(validate(*p.backlog_quota_size));
  if (p.backlog_quota_age) MAGNETAR_RETURN_IF_ERROR(validate(*p.backlog_quota_age));
  if (p.persistence) MAGNETAR_RETURN_IF_ERROR(validate(*p.persistence));
  if (p.publish_rate) MAGNETAR_RETURN_IF_ERROR(validate(*p.publish_rate));
  if (p.dispatch_rate) MAGNETAR_RETURN_IF_ERROR(validate(*p.dispatch_rate));
  if (p.subscription_dispatch_rate) MAGNETAR_RETURN_IF_ERROR(validate(*p.subscription_dispatch_rate));
  if (p.auto_topic_creation) MAGNETAR_RETURN_IF_ERROR(validate(*p.auto_topic_creation));
  if (p.tracing) MAGNETAR_RETURN_IF_ERROR(validate(*p.tracing));
  const std::pair<const std::optional<int32_t>*, std::string_view> limits[] = {
      {&p.max_producers_per_topic, "maxProducersPerTopic"},
      {&p.max_consumers_per_topic, "maxConsumersPerTopic"},
      {&p.max_consumers_per_subscription, "maxConsumersPerSubscription"},
      {&p.max_subscriptions_per_topic, "maxSubscriptionsPerTopic"},
      {&p.max_unacked_messages_per_consumer, "maxUnackedMessagesPerConsumer"},
      {&p.max_unacked_messages_per_subscription, "maxUnackedMessagesPerSubscription"},
      {&p.max_topics_per_namespace, "maxTopicsPerNamespace"},
      {&p.subscription_expiration_minutes, "subscriptionExpirationTimeMinutes"},
  };
  for (const auto& [value, name] : limits) {
    if (*value) MAGNETAR_RETURN_IF_ERROR(at_least(**value, 0, name));
  }
  const std::pair<const std::optional<int64_t>*, std::string_view> compaction[] = {
      {&p.compaction_threshold, "compactionThreshold"},
      {&p.delete_retention_ms, "delete.retention.ms"},
      {&p.min_compaction_lag_ms, "min.compaction.lag.ms"},
  };
  for (const auto& [value, name] : compaction) {
    if (*value) MAGNETAR_RETURN_IF_ERROR(at_least(**value, 0, name));
  }
  for (const auto& [role, actions] : p.permissions) {
    if (role.empty()) return Status::invalid_argument("a permission's role is empty");
    for (const auto& a : actions) {
      if (!is_auth_action(a)) {
        return Status::invalid_argument("unknown action '" + a +
                                        "': expected produce, consume, functions, sources, sinks or packages");
      }
    }
  }
  for (const auto& c : p.replication_clusters) MAGNETAR_RETURN_IF_ERROR(validate_entity_name(c, "cluster"));
  return Status::ok();
}

}  // namespace magnetar::broker
