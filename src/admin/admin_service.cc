#include "admin/admin_service.h"

#include "admin/handlers.h"

namespace magnetar::admin {

AdminService::AdminService(runtime::Runtime& runtime, std::string host, uint16_t port,
                           common::MetricsRegistry& registry, broker::Tenancy* tenancy)
    : runtime_(runtime), host_(std::move(host)), port_(port) {
  register_health_routes(router_);
  register_metrics_routes(router_, registry);
  if (tenancy != nullptr) {
    register_cluster_routes(router_, *tenancy);
    register_tenant_routes(router_, *tenancy);
    register_namespace_routes(router_, *tenancy);
    register_namespace_policy_routes(router_, *tenancy);
    register_partitioned_topic_routes(router_, *tenancy);
    register_topic_policy_routes(router_, *tenancy);
  }
}

common::Status AdminService::start() {
  auto server = HttpServer::listen(runtime_, host_, port_, router_);
  if (!server) return server.status();
  server_ = std::move(server).value();
  return common::Status::ok();
}

void AdminService::stop() {
  if (server_) server_->shutdown();
}

}  // namespace magnetar::admin
