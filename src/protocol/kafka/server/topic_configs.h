// Kafka topic configs onto Magnetar's topic policies, for CreateTopics,
// AlterConfigs and IncrementalAlterConfigs alike.
//
//   retention.ms, retention.bytes   the topic's retention policy (Pulsar's
//                                   minutes and megabytes, rounded up; -1
//                                   unlimited)
//   cleanup.policy                  delete, compact or compact,delete: the
//                                   topic's cleanup policy (compaction.h)
//   delete.retention.ms,            the topic's tombstone retention and
//   min.compaction.lag.ms           compaction lag (>= 0)
//   segment.*, flush.*, min.insync.replicas, compression.type, ...
//                                   accepted, no effect (storage tuning that
//                                   has no meaning here)
//   anything else                   refused
#pragma once

#include <optional>
#include <string>

#include "broker/policies.h"
#include "broker/retention.h"
#include "broker/tenancy.h"
#include "common/result.h"

namespace magnetar::protocol::kafka {

// What config `name` set to `value` (null: no value) asks of the topic's
// retention, starting from `retention`: the policy with the field it sets
// changed, nullopt for a config with no effect on it, kInvalidArgument
// (a message a user can act on) for a config or value that cannot be had.
common::Result<std::optional<broker::RetentionPolicy>> apply_topic_config(const std::string& name,
                                                                         const std::optional<std::string>& value,
                                                                         broker::RetentionPolicy retention);

// What a request asks of a topic's retention: each field a value in
// Pulsar's units (minutes, MB; -1 unlimited), or, when not set, what the
// topic has without a retention policy of its own.
struct RetentionAsked {
  bool time_set = false;
  int64_t time_minutes = 0;
  bool size_set = false;
  int64_t size_mb = 0;

  bool any() const { return time_set || size_set; }
};

// Tenancy thread: the topic's retention policy for `asked`, its unset
// fields from its namespace's policy, else the node's default for the
// protocol that made it (`origin`; nullopt: as recorded with its log). An
// unset field whose default is 0 (Pulsar's "none past consumption", which
// a policy cannot pair with a limit on the other count) is -1: no limit on
// that count. REQUIRES: asked.any().
common::Result<broker::RetentionPolicy> retention_policy_for(broker::Tenancy& tenancy, const broker::TopicName& topic,
                                                             const RetentionAsked& asked,
                                                             std::optional<broker::TopicOrigin> origin = std::nullopt);

// The compaction configs of a topic's own policies (unset: not its own).
struct CompactionConfigs {
  std::optional<broker::CleanupPolicy> cleanup;
  std::optional<int64_t> delete_retention_ms;
  std::optional<int64_t> min_compaction_lag_ms;

  static CompactionConfigs of(const broker::NamespacePolicies& p) {
    return {p.cleanup_policy, p.delete_retention_ms, p.min_compaction_lag_ms};
  }
  void store(broker::NamespacePolicies& p) const {
    p.cleanup_policy = cleanup;
    p.delete_retention_ms = delete_retention_ms;
    p.min_compaction_lag_ms = min_compaction_lag_ms;
  }
  bool operator==(const CompactionConfigs&) const = default;
};
// Whether `name` is one of the compaction configs.
bool is_compaction_config(const std::string& name);
// Sets compaction config `name` to `value` (null: unset it) in `configs`;
// kInvalidArgument for a value that cannot be had.
common::Status set_compaction_config(const std::string& name, const std::optional<std::string>& value,
                                     CompactionConfigs& configs);
// IncrementalAlterConfigs' APPEND (or SUBTRACT) of the comma-separated
// `items` to cleanup.policy.
common::Status edit_cleanup_policy(bool append, const std::string& items, CompactionConfigs& configs);

// Whether `name` is a config apply_topic_config knows.
bool is_known_topic_config(const std::string& name);
// Whether `name` is a list config (APPEND and SUBTRACT apply to it).
bool is_list_topic_config(const std::string& name);

}  // namespace magnetar::protocol::kafka
