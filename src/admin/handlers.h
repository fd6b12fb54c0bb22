// Route registration, one function per group of handlers (handlers/*.cc).
#pragma once

#include <functional>

#include <nlohmann/json.hpp>

#include "admin/router.h"
#include "common/metrics.h"
#include "common/result.h"

namespace magnetar::broker {
class BrokerService;
class SchemaRegistry;
class StorageQuotas;
class Tenancy;
}

namespace magnetar::security {
class ScramCredentials;
}  // namespace magnetar::security

namespace magnetar::admin {

// GET /admin/v2/brokers/health -> "ok"; GET /admin/v2/brokers/ready.
void register_health_routes(Router& router);
// GET /metrics (and /metrics/) in the Prometheus text format.
// `refresh`, when set, runs before each render and calls its argument (from
// any thread) once the values the registry's collectors read are current.
using MetricsRefresh = std::function<void(std::function<void()> then)>;
void register_metrics_routes(Router& router, common::MetricsRegistry& registry, MetricsRefresh refresh = {});

// Multi-tenancy on Pulsar's /admin/v2 layout. The handlers do their blocking
// part on the tenancy thread; `tenancy` must outlive the router.
// /admin/v2/clusters[/{cluster}]
void register_cluster_routes(Router& router, broker::Tenancy& tenancy);
// /admin/v2/tenants[/{tenant}]
void register_tenant_routes(Router& router, broker::Tenancy& tenancy);
// /admin/v2/namespaces/{tenant}[/{namespace}[/topics]]
void register_namespace_routes(Router& router, broker::Tenancy& tenancy);
// /admin/v2/namespaces/{tenant}/{namespace}/<policy>
void register_namespace_policy_routes(Router& router, broker::Tenancy& tenancy);
// /admin/v2/{persistent|non-persistent}/{tenant}/{namespace}[/partitioned|/{topic}/partitions]
void register_partitioned_topic_routes(Router& router, broker::Tenancy& tenancy);
// /admin/v2/{persistent|non-persistent}/{tenant}/{namespace}/{topic}/<policy>
void register_topic_policy_routes(Router& router, broker::Tenancy& tenancy);
// /admin/v2/schemas/{tenant}/{namespace}/{topic}/{schema[/{version}]|versions}
void register_schema_routes(Router& router, broker::Tenancy& tenancy, broker::SchemaRegistry& schemas);
// GET /admin/v2/tenants/{tenant}/usage.
void register_tenant_usage_routes(Router& router, broker::Tenancy& tenancy, broker::BrokerService& broker,
                                  broker::StorageQuotas& storage);

// Topics served by the broker (handlers/topic_common.h has TopicServices,
// which must outlive the router).
struct TopicServices;
// /admin/v2/{domain}/{tenant}/{namespace}[/{topic}[/unload]], /lookup/v2/topic/...
void register_topic_routes(Router& router, TopicServices& services);
// .../{topic}/compaction: start a compaction pass, and its status.
void register_topic_compaction_routes(Router& router, TopicServices& services);
// .../{topic}/stats, /partitioned-stats, /internalStats
void register_topic_stats_routes(Router& router, TopicServices& services);
// .../{topic}/subscriptions, /subscription/{sub}/..., /all_subscription/...
void register_subscription_routes(Router& router, TopicServices& services);
// /admin/v2/overview: the node, counts and totals for the console's overview.
void register_overview_routes(Router& router, TopicServices& services);
// GET .../{topic}/trace: message traces (broker/trace_lookup.h).
void register_trace_routes(Router& router, TopicServices& services);
// /admin/v2/namespaces/{tenant}/{namespace}/{bundles,bundle-owners,unload,{bundle}/unload}
void register_bundle_routes(Router& router, TopicServices& services);
// POST /topics/{domain}/{tenant}/{namespace}/{topic}[/partitions/{n}]: Pulsar's REST producer.
void register_rest_producer_routes(Router& router, TopicServices& services);

// A node of the cluster as the admin API shows it.
struct NodeView {
  uint64_t id = 0;
  std::string cluster_address;  // empty for a standalone node
  std::string raft_role;        // voter, standby, spare; "standalone"
  bool leader = false;
  bool alive = false;
  uint64_t applied_index = 0;   // the last metadata log entry it applied
  nlohmann::json record;        // what the node published about itself (its service URLs, roles)
};
// Every node; runs on a thread that may block.
using NodeDirectory = std::function<common::Result<std::vector<NodeView>>()>;
// GET /admin/v2/cluster/nodes, /admin/v2/brokers/leaderBroker, /admin/v2/brokers/{cluster}.
void register_node_routes(Router& router, broker::Tenancy& tenancy, std::string cluster_name, NodeDirectory nodes);
// /admin/v2/scram-users: the SCRAM users of the Kafka listener (scram_users.cc).
void register_scram_user_routes(Router& router, broker::Tenancy& tenancy, security::ScramCredentials& credentials);

// Decommissioning a cluster's storage nodes; each runs on a thread that may block.
struct StorageNodesAdmin {
  // Starts (drain) or cancels decommissioning node `node`.
  std::function<common::Status(uint64_t node, bool drain)> set_draining;
  // {"id", "alive", "state": active | draining | drained, "fragments" and
  // "ledgers" still naming it, "underReplicatedFragments" in the cluster}.
  std::function<common::Result<nlohmann::json>(uint64_t node)> status;
  // {"ledgers", "underReplicatedFragments", "storageNodes": [{"id", "alive",
  // "zone", "state", "fragments", "ledgers"}], "healing": what the healer
  // last published (replication::HealingStatus) or null}.
  std::function<common::Result<nlohmann::json>()> overview;
};
// GET /admin/v2/cluster/load: every broker's load report and the load
// manager's last decisions (server/load_manager.h); `load` blocks.
void register_load_routes(Router& router, broker::Tenancy& tenancy,
                          std::function<common::Result<nlohmann::json>()> load);
// POST, GET, DELETE /admin/v2/cluster/nodes/{node}/decommission; GET /admin/v2/cluster/storage.
void register_storage_node_routes(Router& router, broker::Tenancy& tenancy, StorageNodesAdmin admin);

}  // namespace magnetar::admin
