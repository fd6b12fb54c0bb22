// Names of clusters, tenants, namespaces and topics, with Pulsar's rules.
//
//   cluster, tenant, namespace: [A-Za-z0-9_.:=-]+, at most kMaxNameLength
//   namespace:  "tenant/namespace"
//   topic:      "persistent://tenant/namespace/local" or "non-persistent://...";
//               the short forms "local" (in public/default) and
//               "tenant/namespace/local" mean persistent://
//   partition:  "<topic>-partition-<n>", n >= 0
//
// Every check returns InvalidArgument with a message that names the rule.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"
#include "common/status.h"

namespace magnetar::broker {

inline constexpr size_t kMaxNameLength = 255;
inline constexpr std::string_view kPartitionSuffix = "-partition-";

// `what` names the kind of thing in the error ("tenant", "cluster", ...).
common::Status validate_entity_name(std::string_view name, std::string_view what);
// A topic's local name: not empty, no '/', no control characters, at most
// kMaxNameLength bytes.
common::Status validate_topic_local_name(std::string_view name);

struct NamespaceName {
  std::string tenant;
  std::string local;

  // From "tenant/namespace".
  static common::Result<NamespaceName> parse(std::string_view full);
  // From its parts, each checked.
  static common::Result<NamespaceName> of(std::string_view tenant, std::string_view local);
  std::string to_string() const { return tenant + "/" + local; }
  bool operator==(const NamespaceName&) const = default;
};

enum class TopicDomain { kPersistent, kNonPersistent };

std::string_view domain_name(TopicDomain d);  // "persistent" or "non-persistent"
common::Result<TopicDomain> parse_domain(std::string_view s);

struct TopicName {
  TopicDomain domain = TopicDomain::kPersistent;
  NamespaceName ns;
  std::string local;   // as written, including any -partition-N suffix
  int32_t partition = -1;  // >= 0 when `local` names one partition

  static common::Result<TopicName> parse(std::string_view name);
  static common::Result<TopicName> of(TopicDomain domain, std::string_view tenant, std::string_view ns,
                                      std::string_view local);

  // "persistent://tenant/ns/local".
  std::string to_string() const;
  bool is_partition() const { return partition >= 0; }
  // The partitioned topic this partition belongs to; itself when not a partition.
  TopicName base() const;
  // Partition `index` of this (base) topic.
  TopicName partition_of(int32_t index) const;
  bool operator==(const TopicName&) const = default;
};

}  // namespace magnetar::broker
