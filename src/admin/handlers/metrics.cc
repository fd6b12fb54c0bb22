// Prometheus scrape endpoint.
#include <memory>

#include "admin/handlers.h"

namespace magnetar::admin {

void register_metrics_routes(Router& router, common::MetricsRegistry& registry, MetricsRefresh refresh) {
  auto scrape = [&registry, refresh](HttpRequest&, Responder respond) {
    auto shared = std::make_shared<Responder>(std::move(respond));
    auto render = [&registry, shared]() {
      HttpResponse r;
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      r.body = registry.render();
      (*shared)(std::move(r));
    };
    if (refresh) return refresh(render);
    render();
  };
  router.get("/metrics", scrape);
  router.get("/metrics/", scrape);
}

}  // namespace magnetar::admin
