#include "admin/admin_service.h"

#include "admin/console.h"
#include "admin/handlers.h"
#include "broker/tenancy.h"

namespace magnetar::admin {

AdminService::AdminService(runtime::Runtime& runtime, std::string host, uint16_t port,
                           common::MetricsRegistry& registry, broker::Tenancy* tenancy,
                           broker::BrokerService* broker, AdvertisedAddress address)
    : runtime_(runtime), host_(std::move(host)), port_(port) {
  register_health_routes(router_);
  if (tenancy != nullptr && broker != nullptr) {
    if (!address.http_port) address.http_port = [this]() { return this->port(); };
    topics_ = std::make_unique<TopicServices>(TopicServices{*tenancy, *broker, std::move(address)});
    topic_metrics_ = std::make_unique<TopicMetrics>(registry, *broker, tenancy->local_cluster());
    register_metrics_routes(router_, registry, [m = topic_metrics_.get()](std::function<void()> then) {
      m->refresh(std::move(then));
    });
    register_topic_routes(router_, *topics_);
    register_topic_stats_routes(router_, *topics_);
    register_subscription_routes(router_, *topics_);
    register_overview_routes(router_, *topics_);
    register_rest_producer_routes(router_, *topics_);
    register_trace_routes(router_, *topics_);
  } else {
    register_metrics_routes(router_, registry);
  }
  if (tenancy != nullptr) {
    register_cluster_routes(router_, *tenancy);
    register_tenant_routes(router_, *tenancy);
    register_namespace_routes(router_, *tenancy);
    register_namespace_policy_routes(router_, *tenancy);
    register_partitioned_topic_routes(router_, *tenancy);
    register_topic_policy_routes(router_, *tenancy);
  }
  // Last: the console answers what no API route does.
  register_console_routes(router_);
}

AdminService::~AdminService() = default;

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
