#include "admin/admin_service.h"

#include "admin/console.h"
#include "admin/handlers.h"
#include "broker/authorization.h"
#include "broker/tenancy.h"

namespace magnetar::admin {

AdminService::AdminService(runtime::Runtime& runtime, std::string host, uint16_t port,
                           common::MetricsRegistry& registry, broker::Tenancy* tenancy,
                           broker::BrokerService* broker, AdvertisedAddress address)
    : runtime_(runtime), host_(std::move(host)) {
  listen_.port = port;
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
    register_topic_compaction_routes(router_, *topics_);
    register_subscription_routes(router_, *topics_);
    register_overview_routes(router_, *topics_);
    register_rest_producer_routes(router_, *topics_);
    register_trace_routes(router_, *topics_);
    register_bundle_routes(router_, *topics_);
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

void AdminService::set_cluster_load(std::function<common::Result<nlohmann::json>()> load) {
  if (topics_) topics_->cluster_load = load;
  if (topics_) register_load_routes(router_, topics_->tenancy, std::move(load));
}

AdminService::~AdminService() = default;

common::Status AdminService::start() {
  auto server = HttpServer::listen(runtime_, host_, listen_, router_, http_limits_);
  if (!server) return server.status();
  server_ = std::move(server).value();
  return common::Status::ok();
}

void AdminService::stop() {
  if (server_) server_->shutdown();
}

namespace {

// What a REST call needs beyond an authenticated role:
//   GET  /admin/v2/clusters...              any role
//   GET  /admin/v2/tenants, /admin/v2/me    any role (the list is filtered)
//   /lookup/v2/topic/{d}/{t}/{ns}/{topic}   lookup (produce or consume)
//   POST /topics/{d}/{t}/{ns}/{topic}...    produce (the REST producer)
//   GET  /admin/v2/tenants/{tenant}         that tenant's admin
//   any other route naming a {tenant}       that tenant's admin, except
//                                           creating, changing or deleting
//                                           the tenant itself (superusers)
//   PUT  /admin/v2/namespaces/.../unload    a superuser (bundles move
//                                           between brokers)
//   /admin/v2/internal/...                  a superuser (other clusters)
//   /admin/v2/trials...                     a superuser (trial tenants'
//                                           admins may not extend them)
//   everything else                         a superuser (clusters, the
//                                           tenant list, /metrics, the
//                                           broker-wide overview)
common::Status authorize(const broker::Authorization& authz, const HttpRequest& r) {
  const std::string& role = r.role;
  const std::string& tenant = r.param("tenant");
  auto topic_of = [&]() {
    auto domain = r.path.rfind("/lookup/v2/topic/non-persistent/", 0) == 0 ||
                          r.path.rfind("/topics/non-persistent/", 0) == 0
                      ? broker::TopicDomain::kNonPersistent
                      : broker::TopicDomain::kPersistent;
    return broker::TopicName::of(domain, tenant, r.param("namespace"), r.param("topic"));
  };
  if (r.path.rfind("/admin/v2/clusters", 0) == 0 && r.method == "GET") return common::Status::ok();
  // What another cluster sends (configuration, acknowledgements), whatever tenant it names.
  if (r.path.rfind("/admin/v2/internal/", 0) == 0) return authz.check_superuser(role);
  if (r.path.rfind("/admin/v2/trials", 0) == 0) return authz.check_superuser(role);
  // Anyone signed in may ask who they are, and list tenants: the list holds
  // only the tenants the role administers (all of them for a superuser).
  if (r.method == "GET" && (r.path == "/admin/v2/tenants" || r.path == "/admin/v2/me")) return common::Status::ok();
  if (r.path.rfind("/lookup/", 0) == 0 || r.path.rfind("/topics/", 0) == 0) {
    auto topic = topic_of();
    if (!topic.is_ok()) return common::Status::ok();  // the handler answers the bad name
    return authz.check(role, *topic,
                       r.path.rfind("/topics/", 0) == 0 ? broker::TopicAction::kProduce : broker::TopicAction::kLookup);
  }
  // Moving bundles between brokers is the operator's, as in Pulsar.
  const std::string unload_suffix = "/unload";
  if (r.path.rfind("/admin/v2/namespaces/", 0) == 0 && r.path.size() > unload_suffix.size() &&
      r.path.compare(r.path.size() - unload_suffix.size(), unload_suffix.size(), unload_suffix) == 0) {
    return authz.check_superuser(role);
  }
  if (!tenant.empty()) {
    const bool tenant_itself = r.path.rfind("/admin/v2/tenants/", 0) == 0;
    if (tenant_itself && r.method != "GET") return authz.check_superuser(role);
    return authz.check_tenant_admin(role, tenant);
  }
  return authz.check_superuser(role);
}

}  // namespace

void AdminService::require_authentication(broker::Authenticator& authenticator,
                                          const broker::Authorization& authorization) {
  router_.set_guard([this, &authenticator, &authorization](HttpRequest& request) -> std::optional<HttpResponse> {
    // The console's own page stays open (its files come through the
    // fallback, which is not guarded); the data it shows comes from the
    // API, which is.
    if (request.path == "/" || anonymous_paths_.count(request.path) > 0) return std::nullopt;
    broker::Credentials credentials = broker::credentials_from_http(request.header("authorization"));
    // A client certificate the trusted CAs signed names the role when no
    // token comes with the request, as for Pulsar clients.
    if (credentials.method == "none" && !request.tls_common_name.empty()) {
      request.role = request.tls_common_name;
      request.authorization = &authorization;
      if (common::Status allowed = authorize(authorization, request); !allowed.is_ok()) {
        return HttpResponse::error(403, allowed.message());
      }
      return std::nullopt;
    }
    if (credentials.method == "none") {
      HttpResponse denied = HttpResponse::error(401, "authentication is required: send Authorization: Bearer <token>");
      denied.headers.emplace_back("WWW-Authenticate", "Bearer");
      return denied;
    }
    auto role = authenticator.authenticate(credentials);
    if (!role.is_ok()) {
      HttpResponse denied = HttpResponse::error(401, role.status().message());
      denied.headers.emplace_back("WWW-Authenticate", "Bearer");
      return denied;
    }
    request.role = std::move(*role);
    request.authorization = &authorization;
    if (common::Status allowed = authorize(authorization, request); !allowed.is_ok()) {
      return HttpResponse::error(403, allowed.message());
    }
    return std::nullopt;
  });
}

}  // namespace magnetar::admin
