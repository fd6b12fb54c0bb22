// Tenancy: clusters, tenants, namespaces, their policies and partitioned
// topics, kept in the metadata store, with Pulsar's rules:
//   - a tenant may only name clusters that exist; a cluster still allowed by
//     a tenant cannot be deleted, nor can the local cluster;
//   - a namespace needs its tenant; a tenant with namespaces, or a namespace
//     with topics, cannot be deleted (FailedPrecondition);
//   - every write is checked first and either applies whole or not at all.
//
// Metadata layout (also read by other layers; see the key functions below):
//   /admin/bootstrap                          set once the first start is done
//   /admin/clusters/{cluster}                 Cluster record
//   /admin/tenants/{tenant}                   Tenant record
//   /admin/tenant-limits/{tenant}             TenantLimits record (absent: no limits)
//   /admin/policies/{tenant}/{namespace}      NamespacePolicies record
//   /admin/partitioned-topics/{tenant}/{namespace}/{domain}/{topic}
//   /admin/topic-policies/{tenant}/{namespace}/{domain}/{topic}   NamespacePolicies
//       record holding a topic's overrides (unset fields inherit the namespace's)
//   /managed-ledgers/{tenant}/{namespace}/{domain}/{topic}   (ledger/, per topic)
//
// Threads: the operations below block on the metadata store. They run on
// this component's "tenancy" worker thread (submit) or on main at start-up,
// never on a reactor and never on the metadata thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "broker/naming.h"
#include "broker/policies.h"
#include "broker/retention.h"
#include "common/result.h"
#include "metadata/store.h"
#include "runtime/component.h"
#include "runtime/task.h"
#include "runtime/worker_thread.h"

namespace magnetar::broker {

// Metadata keys. Names are assumed valid (see naming.h).
std::string cluster_key(std::string_view cluster);
std::string tenant_key(std::string_view tenant);
std::string tenant_limits_key(std::string_view tenant);
std::string namespace_key(const NamespaceName& ns);
std::string partitioned_topic_key(const TopicName& topic);
std::string managed_ledger_key(const TopicName& topic);
std::string topic_policies_key(const TopicName& topic);

// Every persistent topic of `tenant` that has a managed ledger, over all its
// namespaces, with its metadata key (blocking; for the threads that may
// block, see below).
struct StoredTopic {
  TopicName name;
  std::string key;  // managed_ledger_key(name)
};
common::Result<std::vector<StoredTopic>> stored_topics_of_tenant(metadata::Store& store, const std::string& tenant);
// What every topic_policies_key of a topic in `ns` starts with.
std::string topic_policies_prefix(const NamespaceName& ns);

// What the first start creates: the local cluster, tenant "public" with
// namespace "public/default", and the system namespace "pulsar/system".
struct BootstrapDefaults {
  std::string cluster = "standalone";
  ClusterInfo cluster_info;
  RetentionDefaults retention;  // the node's, for retention_in_effect
};

inline constexpr std::string_view kPublicTenant = "public";
inline constexpr std::string_view kDefaultNamespace = "default";
inline constexpr std::string_view kSystemTenant = "pulsar";
inline constexpr std::string_view kSystemNamespace = "system";

struct IsolationPolicy;

// A tenant's whole configuration as its home cluster sends it to the other
// clusters it allows (georep/config_sync.h).
struct TenantConfiguration {
  TenantInfo info;
  std::optional<TenantLimits> limits;               // none: no limits
  std::map<std::string, NamespacePolicies> namespaces;  // by "tenant/namespace"
  // Partitioned topics' partition counts, by full topic name. Created and
  // grown where they are received, never deleted there (Kafka clients
  // create topics on every cluster).
  std::map<std::string, int32_t> partitioned_topics;
  // Topic-level policy overrides, by full topic name.
  std::map<std::string, NamespacePolicies> topic_policies;
};
// As TenantConfiguration in tenancy.fbs.
std::string encode_configuration(const TenantConfiguration& config);
common::Result<TenantConfiguration> decode_configuration(std::string_view bytes);

class Tenancy final : public runtime::Component {
 public:
  Tenancy(metadata::Store& store, BootstrapDefaults defaults);
  ~Tenancy() override;

  // start() (main thread) creates the first-start defaults when the store has
  // none yet, then takes work. stop() finishes queued work.
  std::string_view name() const override { return "tenancy"; }
  common::Status start() override;
  void stop() override;

  // Any thread: runs `task` on the tenancy thread, where the blocking
  // operations below may be called. ResourceExhausted when the queue is full,
  // Unavailable when stopped; the task is dropped then.
  common::Status submit(runtime::Task task);

  const std::string& local_cluster() const { return defaults_.cluster; }

  // Clusters.
  common::Result<std::vector<std::string>> list_clusters();
  common::Result<ClusterInfo> get_cluster(const std::string& cluster);
  common::Status create_cluster(const std::string& cluster, const ClusterInfo& info);
  common::Status update_cluster(const std::string& cluster, const ClusterInfo& info);
  common::Status delete_cluster(const std::string& cluster);
  // Namespace isolation policies of `cluster` (isolation.h), by name.
  common::Result<std::map<std::string, IsolationPolicy>> isolation_policies(const std::string& cluster);
  // Creates or replaces one; InvalidArgument when it does not validate.
  common::Status set_isolation_policy(const std::string& cluster, const std::string& name,
                                      const IsolationPolicy& policy);
  common::Status delete_isolation_policy(const std::string& cluster, const std::string& name);

  // Tenants. A tenant whose home cluster (TenantInfo::home_cluster) is
  // another is edited there: update_tenant, delete_tenant, the limits and
  // its namespaces' create, delete and update_policies answer
  // FailedPrecondition naming the home, but for an update that makes this
  // cluster the home (taking it over when the home is lost). An update
  // without a home keeps the current one.
  common::Result<std::vector<std::string>> list_tenants();
  common::Result<TenantInfo> get_tenant(const std::string& tenant);
  common::Status create_tenant(const std::string& tenant, const TenantInfo& info);
  common::Status update_tenant(const std::string& tenant, const TenantInfo& info);
  // Deleting a tenant deletes its limits too.
  common::Status delete_tenant(const std::string& tenant);
  // A tenant's aggregate limits. get answers every field -1 when none are
  // set; kNotFound when the tenant does not exist.
  common::Result<TenantLimits> get_tenant_limits(const std::string& tenant);
  common::Status set_tenant_limits(const std::string& tenant, const TenantLimits& limits);
  common::Status remove_tenant_limits(const std::string& tenant);

  // Namespaces. list_namespaces answers "tenant/namespace" names.
  common::Result<std::vector<std::string>> list_namespaces(const std::string& tenant);
  common::Result<NamespacePolicies> get_policies(const NamespaceName& ns);
  common::Status create_namespace(const NamespaceName& ns, const NamespacePolicies& policies);
  common::Status delete_namespace(const NamespaceName& ns);
  // Reads the policies, lets `change` edit them, validates and writes them
  // back with compare-and-set, retrying when another write came first. An
  // error from `change` aborts with nothing written.
  common::Status update_policies(const NamespaceName& ns,
                                 const std::function<common::Status(NamespacePolicies&)>& change);

  // Configuration sync (georep/config_sync.h). What the home cluster sends
  // of `tenant`: NotFound when it does not exist.
  common::Result<TenantConfiguration> configuration_of(const std::string& tenant);
  // Makes `tenant` here what its home cluster `config.info.home_cluster`
  // says: the tenant (created or replaced), its limits, its namespaces
  // (created, their policies replaced, those the home no longer has deleted
  // once they hold no topic). FailedPrecondition when this cluster is the
  // tenant's home itself (two clusters claim it).
  common::Status apply_configuration(const std::string& tenant, const TenantConfiguration& config);
  // The tenant was deleted at its home `home`: its namespaces (those
  // without topics) and, when none is left, the tenant go here too.
  common::Status remove_configuration(const std::string& tenant, const std::string& home);

  // Partitioned topics (metadata only). get_partitions answers 0 for a topic
  // that is not partitioned, NotFound when its namespace does not exist.
  common::Status create_partitioned_topic(const TopicName& topic, int32_t partitions);
  common::Result<int32_t> get_partitions(const TopicName& topic);
  // Only grows: Pulsar cannot shrink a partitioned topic either.
  common::Status update_partitions(const TopicName& topic, int32_t partitions);
  common::Status delete_partitioned_topic(const TopicName& topic);
  common::Result<std::vector<std::string>> list_partitioned_topics(const NamespaceName& ns, TopicDomain domain);
  // Every topic of the namespace in `domain` that metadata knows: partitions
  // of partitioned topics and topics with a managed ledger.
  common::Result<std::vector<std::string>> list_topics(const NamespaceName& ns, TopicDomain domain);
  // The persistent topics (partitions included) of `ns` that have a stored
  // durable subscription named `subscription`.
  common::Result<std::vector<TopicName>> topics_with_subscription(const NamespaceName& ns,
                                                                  const std::string& subscription);
  // list_topics and the namespace's topics loaded in `domain` (a
  // non-persistent topic lives only in its broker; see set_loaded_topics),
  // sorted, the namespace's trace topic left out.
  common::Result<std::vector<std::string>> known_topics(const NamespaceName& ns, TopicDomain domain);

  // Topic counts. admit_topic says whether `topic` may come into being:
  // within its namespace's maxTopicsPerNamespace and its
  // tenant's maxTopics (a partitioned topic counts its partitions, as in
  // Pulsar). Counts what known_topics knows plus the topics admitted in the
  // last seconds that may not be stored yet (a deleted topic's admission
  // goes with its delete_topic_policies). FailedPrecondition with the
  // limit's words when over. Every creation path comes through here:
  // partitioned topics (all their partitions at once) below, the others
  // through the broker's load path.
  common::Status admit_topic(const TopicName& topic) { return admit_topics(topic, 1, true); }
  // Whether `topic` may gain durable subscription `subscription`: within
  // its tenant's maxSubscriptions, counting every durable subscription of
  // its persistent topics (stored cursors, loaded or not) and those
  // admitted in the last seconds. FailedPrecondition with the limit's words
  // when over.
  common::Status admit_subscription(const TopicName& topic, const std::string& subscription);
  // What the limits above count now: the tenant's topics, and its durable
  // subscriptions as "topic/subscription" names.
  common::Result<size_t> count_tenant_topics(const std::string& tenant);
  common::Result<std::set<std::string>> stored_subscriptions(const std::string& tenant);
  // Where known_topics finds loaded topics ("domain://tenant/ns/topic"
  // names). REQUIRES: before start().
  void set_loaded_topics(std::function<std::vector<std::string>()> fn) { loaded_topics_ = std::move(fn); }

  // Topic-level policy overrides. A topic exists for these when metadata
  // knows it: a partitioned topic, one of its partitions, or a topic with a
  // managed ledger (NotFound otherwise). get_topic_policies answers an empty
  // record when nothing is overridden; update_topic_policies works as
  // update_policies. Deleting a partitioned topic deletes its overrides and
  // those of its partitions.
  common::Status require_topic(const TopicName& topic);
  // Which protocol made `topic` (retention.h), as its log records it; for
  // a partitioned topic, as its first partition's does. kPulsar for a
  // topic whose log was never made.
  common::Result<TopicOrigin> topic_origin(const TopicName& topic);
  // The retention `topic` has (retention.h): its override, else its
  // namespace's policy, else the node's default for its origin.
  common::Result<RetentionInEffect> retention_of(const TopicName& topic);
  const RetentionDefaults& retention_defaults() const { return defaults_.retention; }
  common::Result<NamespacePolicies> get_topic_policies(const TopicName& topic);
  common::Status update_topic_policies(const TopicName& topic,
                                       const std::function<common::Status(NamespacePolicies&)>& change);
  // Drops a topic's overrides (ok when it has none). Whoever deletes a
  // non-partitioned topic calls this, so a topic re-created under the same
  // name starts clean; deleting a namespace drops whatever is left.
  common::Status delete_topic_policies(const TopicName& topic);

  static constexpr int32_t kMaxPartitions = 10000;

 private:
  common::Status ensure_defaults();
  common::Status require_namespace(const NamespaceName& ns);
  // Adds the topic-level overrides stored for `ns`'s topics, by full name.
  common::Status stored_topic_policies(const NamespaceName& ns, std::map<std::string, NamespacePolicies>& out);
  common::Status check_clusters_exist(const std::set<std::string>& clusters);
  // FailedPrecondition when `tenant`'s home is another cluster (and this
  // thread is not applying that home's configuration).
  common::Status check_home(const std::string& tenant);

  // `new_topics` more for `topic` (one, or a partitioned topic's
  // partitions); `remember`: count it as admitted until it is stored.
  common::Status admit_topics(const TopicName& topic, int32_t new_topics, bool remember);
  common::Result<size_t> count_tenant_topics(const std::string& tenant, const std::vector<std::string>& loaded,
                                             const TopicName& asking);
  // Topics in `ns` now: known_topics of both domains and recent admissions,
  // `asking` left out.
  common::Result<size_t> count_topics(const NamespaceName& ns, const std::vector<std::string>& loaded,
                                      const TopicName& asking);

  metadata::Store& store_;
  const BootstrapDefaults defaults_;
  std::unique_ptr<runtime::WorkerThread> worker_;
  std::function<std::vector<std::string>()> loaded_topics_;
  // Tenancy thread only: "namespace" -> topic -> when it was admitted.
  std::map<std::string, std::map<std::string, std::chrono::steady_clock::time_point>> admitted_;
  // Tenancy thread only: tenant -> "topic/subscription" -> when admitted.
  std::map<std::string, std::map<std::string, std::chrono::steady_clock::time_point>> admitted_subscriptions_;
};

}  // namespace magnetar::broker
