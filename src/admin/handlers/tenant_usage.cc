// GET /admin/v2/tenants/{tenant}/usage: what a tenant uses now, beside each
// of its aggregate limits (tenants.cc /limits): stored bytes, topics,
// durable subscriptions, producers, consumers and client connections.
#include "admin/handlers.h"
#include "admin/handlers/policy_json.h"
#include "admin/handlers/tenancy_common.h"
#include "broker/storage_quotas.h"

namespace magnetar::admin {

void register_tenant_usage_routes(Router& router, broker::Tenancy& tenancy, broker::BrokerService& broker,
                                  broker::StorageQuotas& storage) {
  router.get("/admin/v2/tenants/{tenant}/usage", [&tenancy, &broker, &storage](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [&tenancy, &broker, &storage, name = req.param("tenant")]() {
      auto limits = tenancy.get_tenant_limits(name);  // NotFound for a tenant that does not exist
      if (!limits.is_ok()) return error_response(limits.status());
      auto stored = storage.stored_bytes(name);
      if (!stored.is_ok()) return error_response(stored.status());
      auto topics = tenancy.count_tenant_topics(name);
      if (!topics.is_ok()) return error_response(topics.status());
      auto subscriptions = tenancy.stored_subscriptions(name);
      if (!subscriptions.is_ok()) return error_response(subscriptions.status());
      auto counters = broker.tenant_counters(name);
      return HttpResponse::json(
          200, Json{{"storageSize", *stored},
                    {"storageQuotaExceeded", counters->storage_exceeded.load(std::memory_order_relaxed)},
                    {"topics", *topics},
                    {"subscriptions", subscriptions->size()},
                    {"producers", counters->producers.load(std::memory_order_relaxed)},
                    {"consumers", counters->consumers.load(std::memory_order_relaxed)},
                    {"connections", counters->connections.load(std::memory_order_relaxed)}});
    });
  });
}

}  // namespace magnetar::admin
