// Broker health, as Pulsar's /admin/v2/brokers/health answers it.
#include "admin/handlers.h"

namespace magnetar::admin {

void register_health_routes(Router& router) {
  router.get("/admin/v2/brokers/health", [](HttpRequest&, Responder respond) {
    respond(HttpResponse::text(200, "ok"));
  });
  router.get("/admin/v2/brokers/ready", [](HttpRequest&, Responder respond) {
    respond(HttpResponse::text(200, "ok"));
  });
}

}  // namespace magnetar::admin
