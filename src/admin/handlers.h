// Route registration, one function per group of handlers (handlers/*.cc).
#pragma once

#include "admin/router.h"
#include "common/metrics.h"

namespace magnetar::admin {

// GET /admin/v2/brokers/health -> "ok"; GET /admin/v2/brokers/ready.
void register_health_routes(Router& router);
// GET /metrics (and /metrics/) in the Prometheus text format.
void register_metrics_routes(Router& router, common::MetricsRegistry& registry);

}  // namespace magnetar::admin
