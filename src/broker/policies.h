// Multi-tenancy records: clusters, tenants, namespace policies and partitioned
// topics, as the broker reads them. Stored as the FlatBuffers tables of
// tenancy.fbs (encode_* / decode_* below); the REST API shows them with
// Pulsar's JSON field names (admin/handlers/policy_json.h).
//
// A policy left unset (std::nullopt) means "the broker's default applies".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace magnetar::broker {

struct ClusterInfo {
  std::string service_url;             // http://host:8080
  std::string service_url_tls;
  std::string broker_service_url;      // pulsar://host:6650
  std::string broker_service_url_tls;
  // How geo-replicators authenticate to this cluster: Pulsar's token plugin
  // with parameters "token:<jwt>" or "file:///path/to/token"; empty: they
  // do not. The parameters are a secret: never shown by the admin API.
  std::string authentication_plugin;
  std::string authentication_parameters;
  // Geo-replicators reach this cluster over TLS (brokerServiceUrlTls),
  // checking its certificate against the PEM CAs of `trust_certs_file`
  // (empty: the system's), unless `tls_allow_insecure`.
  bool broker_client_tls_enabled = false;
  bool tls_allow_insecure = false;
  std::string broker_client_trust_certs_file{};
  // The certificate and key replicators present to it (a cluster that
  // requires trusted client certificates); empty: none.
  std::string broker_client_certificate_file{};
  std::string broker_client_key_file{};
  bool operator==(const ClusterInfo&) const = default;
};

struct TenantInfo {
  std::set<std::string> admin_roles;
  std::set<std::string> allowed_clusters;
  // The cluster where its configuration (the tenant, its namespaces and
  // their policies) is edited and from which the other allowed clusters
  // receive it (georep/config_sync.h); empty: edited on each cluster
  // alone, not synchronised.
  std::string home_cluster{};
  bool operator==(const TenantInfo&) const = default;
};

// A tenant's aggregate limits, over all its namespaces and topics (a
// Magnetar extension: Pulsar limits namespaces and topics only). -1: no limit.
struct TenantLimits {
  int64_t publish_msgs_per_second = -1;
  int64_t publish_bytes_per_second = -1;
  int32_t max_producers = -1;  // over all its topics, every protocol
  int32_t max_consumers = -1;
  int32_t max_connections = -1;  // client connections using the tenant, every protocol
  int32_t max_topics = -1;         // over all its namespaces, a partitioned topic counting its partitions
  int32_t max_subscriptions = -1;  // over all its topics, every protocol
  int64_t storage_quota_bytes = -1;  // stored bytes over all its topics, loaded or not
  int64_t dispatch_msgs_per_second = -1;  // delivered over all its topics and subscriptions
  int64_t dispatch_bytes_per_second = -1;
  int32_t max_namespaces = -1;
  // The largest entry one publish may store (a Pulsar batch, a Kafka record
  // batch, an AMQP message), below the node's own largest message.
  int64_t max_message_bytes = -1;
  bool operator==(const TenantLimits&) const = default;
};

struct RetentionPolicy {
  int64_t time_minutes = 0;  // -1: keep forever
  int64_t size_mb = 0;       // -1: no size limit
  bool operator==(const RetentionPolicy&) const = default;
};

enum class BacklogQuotaAction { kProducerRequestHold, kProducerException, kConsumerBacklogEviction };
std::string_view backlog_action_name(BacklogQuotaAction a);  // "producer_request_hold", ...
common::Result<BacklogQuotaAction> parse_backlog_action(std::string_view s);

struct BacklogQuota {
  int64_t limit_size = -1;  // bytes; -1 unlimited
  int64_t limit_time = -1;  // seconds; -1 unlimited
  BacklogQuotaAction action = BacklogQuotaAction::kProducerRequestHold;
  bool operator==(const BacklogQuota&) const = default;
};

// When the journal makes acknowledged entries durable.
enum class FsyncMode { kAlways, kInterval, kNever };
std::string_view fsync_mode_name(FsyncMode m);  // "always", "interval", "never"
common::Result<FsyncMode> parse_fsync_mode(std::string_view s);

struct PersistencePolicy {
  int32_t ensemble = 1;
  int32_t write_quorum = 1;
  int32_t ack_quorum = 1;
  double max_mark_delete_rate = 0;  // cursor persists per second per subscription; 0: no limit
  std::optional<FsyncMode> fsync_mode;  // nullopt: the node's --fsync
  int32_t fsync_interval_ms = 0;    // kInterval only
  bool operator==(const PersistencePolicy&) const = default;
};

// Pulsar's BookieAffinityGroupData: the storage groups (`--storage-group`,
// comma-separated) a namespace's ledgers' copies are kept in, the primary
// first, the secondary only when the primary have too few live nodes.
struct BookieAffinityGroup {
  std::string primary;
  std::string secondary;
  bool operator==(const BookieAffinityGroup&) const = default;
};

struct PublishRate {
  int64_t msgs_per_second = -1;   // -1: unlimited
  int64_t bytes_per_second = -1;
  bool operator==(const PublishRate&) const = default;
};

struct DispatchRate {
  int64_t msgs_per_period = -1;   // -1: unlimited
  int64_t bytes_per_period = -1;
  int32_t period_seconds = 1;
  bool relative_to_publish_rate = false;
  bool operator==(const DispatchRate&) const = default;
};

struct AutoTopicCreation {
  bool allow = true;
  bool partitioned = false;       // topicType "partitioned" or "non-partitioned"
  int32_t default_partitions = 0; // partitioned only
  bool operator==(const AutoTopicCreation&) const = default;
};

// Message tracing (tracing.h): which messages of a namespace's topics the
// broker records a trace for, and how long the traces are kept.
enum class TraceMode { kOff, kSampled, kAll };
std::string_view trace_mode_name(TraceMode m);  // "off", "sampled", "all"
common::Result<TraceMode> parse_trace_mode(std::string_view s);

struct TracingPolicy {
  TraceMode mode = TraceMode::kOff;
  double rate = 1.0;                 // kSampled: the fraction traced, in (0, 1]
  int64_t retention_minutes = 7 * 24 * 60;  // traces kept this long (-1: forever)
  int64_t retention_size_mb = 1024;         // and at most this much (-1: no limit)
  bool operator==(const TracingPolicy&) const = default;
};

// Actions a role may be granted on a namespace.
inline constexpr std::string_view kAuthActions[] = {"produce", "consume", "functions", "sources", "sinks",
                                                    "packages"};
bool is_auth_action(std::string_view s);

// Which subscription names a role may use (Pulsar's subscription_auth_mode):
// kPrefix requires names that start with the role (`role-...`) for roles
// that do not administer the tenant.
enum class SubscriptionAuthMode { kNone, kPrefix };
std::string_view subscription_auth_mode_name(SubscriptionAuthMode m);  // "None", "Prefix"
common::Result<SubscriptionAuthMode> parse_subscription_auth_mode(std::string_view s);

// Kafka's cleanup.policy: whether a topic's history is trimmed by retention
// ("delete"), replaced by its compacted view ("compact": compacted
// automatically, never trimmed by retention time or size), or both.
enum class CleanupPolicy { kDelete, kCompact, kCompactDelete };
std::string_view cleanup_policy_name(CleanupPolicy p);  // "delete", "compact", "compact,delete"
// Also accepts "delete,compact"; InvalidArgument otherwise.
common::Result<CleanupPolicy> parse_cleanup_policy(std::string_view s);

struct NamespacePolicies {
  std::optional<RetentionPolicy> retention;
  std::optional<int32_t> message_ttl_seconds;
  std::optional<BacklogQuota> backlog_quota_size;  // Pulsar's destination_storage
  std::optional<BacklogQuota> backlog_quota_age;   // Pulsar's message_age
  std::optional<PersistencePolicy> persistence;
  std::optional<bool> deduplication;
  std::map<std::string, std::set<std::string>> permissions;  // role -> actions
  // subscription -> the only roles that may consume through it (on top of
  // their consume permission); a subscription not listed is open to all.
  std::map<std::string, std::set<std::string>> subscription_roles;
  std::optional<SubscriptionAuthMode> subscription_auth_mode;  // unset: kNone
  std::optional<PublishRate> publish_rate;
  std::optional<DispatchRate> dispatch_rate;               // per topic
  std::optional<DispatchRate> subscription_dispatch_rate;  // per subscription
  std::optional<int32_t> max_producers_per_topic;
  std::optional<int32_t> max_consumers_per_topic;
  std::optional<int32_t> max_consumers_per_subscription;
  // Shared and Key_Shared dispatch stops at this many unacknowledged
  // messages (per consumer, per subscription) until acks bring it to half;
  // 0: no limit. Unset: Pulsar's defaults, 50000 and 200000.
  std::optional<int32_t> max_unacked_messages_per_consumer;
  std::optional<int32_t> max_unacked_messages_per_subscription;
  std::optional<int32_t> max_subscriptions_per_topic;
  std::optional<int32_t> max_topics_per_namespace;
  std::optional<int32_t> subscription_expiration_minutes;
  std::optional<AutoTopicCreation> auto_topic_creation;
  std::set<std::string> replication_clusters;
  std::optional<TracingPolicy> tracing;  // unset: off
  // Topic compaction (compaction.h). compactionThreshold: bytes of a
  // topic's log after its compacted view's horizon that start a pass; 0:
  // never automatically. The rest are Kafka's topic configs.
  std::optional<int64_t> compaction_threshold;
  std::optional<CleanupPolicy> cleanup_policy;  // unset: delete
  std::optional<int64_t> delete_retention_ms;    // unset: a day for compact topics, 0 otherwise
  std::optional<int64_t> min_compaction_lag_ms;  // unset: 0
  // Cluster only: where the copies of the namespace's ledgers live.
  std::optional<BookieAffinityGroup> bookie_affinity;
  bool operator==(const NamespacePolicies&) const = default;
};

// Checks ranges and relations (write quorum <= ensemble, ...). InvalidArgument.
common::Status validate(const RetentionPolicy& p);
common::Status validate(const BacklogQuota& p);
common::Status validate(const PersistencePolicy& p);
common::Status validate(const PublishRate& p);
common::Status validate(const DispatchRate& p);
common::Status validate(const AutoTopicCreation& p);
common::Status validate(const TracingPolicy& p);
common::Status validate(const NamespacePolicies& p);
common::Status validate(const TenantLimits& p);

// FlatBuffers encodings (tenancy.fbs). decode_* answers Corruption for bytes
// that fail verification or come from a newer format.
std::string encode_cluster(const ClusterInfo& c);
common::Result<ClusterInfo> decode_cluster(std::string_view bytes);
std::string encode_tenant(const TenantInfo& t);
common::Result<TenantInfo> decode_tenant(std::string_view bytes);
std::string encode_tenant_limits(const TenantLimits& l);
common::Result<TenantLimits> decode_tenant_limits(std::string_view bytes);
std::string encode_policies(const NamespacePolicies& p);
common::Result<NamespacePolicies> decode_policies(std::string_view bytes);
std::string encode_partitions(int32_t partitions);
common::Result<int32_t> decode_partitions(std::string_view bytes);

}  // namespace magnetar::broker
