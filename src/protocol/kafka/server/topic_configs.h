// Kafka topic configs onto Magnetar's topic policies, for CreateTopics,
// AlterConfigs and IncrementalAlterConfigs alike.
//
//   retention.ms, retention.bytes   the topic's retention policy (Pulsar's
//                                   minutes and megabytes, rounded up; -1
//                                   unlimited)
//   cleanup.policy                  only "delete" (no compaction)
//   segment.*, flush.*, min.insync.replicas, compression.type, ...
//                                   accepted, no effect (storage tuning that
//                                   has no meaning here)
//   anything else                   refused
#pragma once

#include <optional>
#include <string>

#include "broker/policies.h"
#include "common/result.h"

namespace magnetar::protocol::kafka {

// What config `name` set to `value` (null: no value) asks of the topic's
// retention, starting from `retention`: the policy with the field it sets
// changed, nullopt for a config with no effect on it, kInvalidArgument
// (a message a user can act on) for a config or value that cannot be had.
common::Result<std::optional<broker::RetentionPolicy>> apply_topic_config(const std::string& name,
                                                                         const std::optional<std::string>& value,
                                                                         broker::RetentionPolicy retention);

// Whether `name` is a config apply_topic_config knows.
bool is_known_topic_config(const std::string& name);
// Whether `name` is a list config (APPEND and SUBTRACT apply to it).
bool is_list_topic_config(const std::string& name);

}  // namespace magnetar::protocol::kafka
