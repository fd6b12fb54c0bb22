// AdminService: the HTTP port as a server component. Serves the REST admin
// API, /metrics and (later) the web console from one Router.
#pragma once

#include <memory>
#include <set>
#include <string>

#include "admin/handlers/topic_common.h"
#include "admin/handlers/topic_metrics.h"
#include "admin/http_server.h"
#include "admin/router.h"
#include "broker/authentication.h"
#include "broker/authorization.h"
#include "common/metrics.h"
#include "runtime/component.h"

namespace magnetar::broker {
class BrokerService;
class Tenancy;
}

namespace magnetar::admin {

class AdminService final : public runtime::Component {
 public:
  // With a `tenancy`, also serves the multi-tenancy REST API; with a
  // `broker` too, the topic routes, lookups and per-topic metrics. Both must
  // outlive this service. `address` is what lookups answer; its HTTP port
  // defaults to this service's bound port.
  AdminService(runtime::Runtime& runtime, std::string host, uint16_t port,
               common::MetricsRegistry& registry, broker::Tenancy* tenancy = nullptr,
               broker::BrokerService* broker = nullptr, AdvertisedAddress address = {});
  ~AdminService() override;
  std::string_view name() const override { return "admin-http"; }
  common::Status start() override;
  void stop() override;

  // Routes may be added until start().
  Router& router() { return router_; }
  // A cluster member: GET /admin/v2/cluster/load answers `load`'s view,
  // and each bundle's owner listing carries the load its owner reported.
  // Before start().
  void set_cluster_load(std::function<common::Result<nlohmann::json>()> load);
  // Every route but the console's page and files then needs credentials
  // the authenticator accepts (`Authorization: Bearer <token>`, or Basic
  // user:password): 401 without them. `authorization` decides what the
  // role may call (403 otherwise; admin_service.cc has the rules).
  // Before start().
  void require_authentication(broker::Authenticator& authenticator, const broker::Authorization& authorization);
  // Requests to `path` (exactly) pass without credentials even when
  // authentication is required: the handler decides on its own. Before
  // start().
  void allow_anonymous(std::string path) { anonymous_paths_.insert(std::move(path)); }
  // Bounds on requests and on slow clients (HttpLimits). Before start().
  void set_http_limits(HttpLimits limits) { http_limits_ = limits; }
  // Also (or only, without `plain_enabled`) serve HTTPS on `tls_port` with
  // `tls`. Before start().
  void serve_tls(bool plain_enabled, std::shared_ptr<runtime::TlsContextSource> tls, uint16_t tls_port) {
    listen_.plain_enabled = plain_enabled;
    listen_.tls = std::move(tls);
    listen_.tls_port = tls_port;
  }
  // The bound ports (0 when off); valid after start().
  uint16_t port() const { return server_ ? server_->port() : 0; }
  uint16_t tls_port() const { return server_ ? server_->tls_port() : 0; }

 private:
  runtime::Runtime& runtime_;
  const std::string host_;
  runtime::ListenerPorts listen_;
  std::unique_ptr<TopicServices> topics_;
  std::unique_ptr<TopicMetrics> topic_metrics_;
  Router router_;
  std::set<std::string> anonymous_paths_;
  HttpLimits http_limits_;
  std::unique_ptr<HttpServer> server_;
};

}  // namespace magnetar::admin
