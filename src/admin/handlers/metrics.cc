// Prometheus scrape endpoint.
#include "admin/handlers.h"

namespace magnetar::admin {

void register_metrics_routes(Router& router, common::MetricsRegistry& registry) {
  auto scrape = [&registry](HttpRequest&, Responder respond) {
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = registry.render();
    respond(std::move(r));
  };
  router.get("/metrics", scrape);
  router.get("/metrics/", scrape);
}

}  // namespace magnetar::admin
