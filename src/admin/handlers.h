// Route registration, one function per group of handlers (handlers/*.cc).
#pragma once

#include "admin/router.h"
#include "common/metrics.h"

namespace magnetar::broker {
class Tenancy;
}

namespace magnetar::admin {

// GET /admin/v2/brokers/health -> "ok"; GET /admin/v2/brokers/ready.
void register_health_routes(Router& router);
// GET /metrics (and /metrics/) in the Prometheus text format.
void register_metrics_routes(Router& router, common::MetricsRegistry& registry);

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

}  // namespace magnetar::admin
