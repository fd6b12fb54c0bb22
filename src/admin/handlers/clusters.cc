// /admin/v2/clusters[/{cluster}]: Pulsar's ClusterData, metadata only.
#include "admin/handlers.h"
#include "admin/handlers/policy_json.h"
#include "admin/handlers/tenancy_common.h"

namespace magnetar::admin {

void register_cluster_routes(Router& router, broker::Tenancy& tenancy) {
  router.get("/admin/v2/clusters", [&tenancy](HttpRequest&, Responder respond) {
    run_blocking(tenancy, std::move(respond), [&tenancy]() {
      auto clusters = tenancy.list_clusters();
      return clusters.is_ok() ? HttpResponse::json(200, *clusters) : error_response(clusters.status());
    });
  });
  router.get("/admin/v2/clusters/{cluster}", [&tenancy](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [&tenancy, name = req.param("cluster")]() {
      auto c = tenancy.get_cluster(name);
      return c.is_ok() ? HttpResponse::json(200, to_json(*c)) : error_response(c.status());
    });
  });
  auto write = [&tenancy](bool create) {
    return [&tenancy, create](HttpRequest& req, Responder respond) {
      run_blocking(tenancy, std::move(respond), [&tenancy, create, name = req.param("cluster"), body = req.body]() {
        if (common::Status valid = broker::validate_entity_name(name, "cluster"); create && !valid.is_ok()) {
          return invalid_name_response(valid);
        }
        auto j = parse_json_body(body);
        if (!j.is_ok()) return error_response(j.status());
        auto info = cluster_from_json(*j);
        if (!info.is_ok()) return error_response(info.status());
        return empty_or_error(create ? tenancy.create_cluster(name, *info) : tenancy.update_cluster(name, *info));
      });
    };
  };
  router.put("/admin/v2/clusters/{cluster}", write(true));
  router.post("/admin/v2/clusters/{cluster}", write(false));
  router.del("/admin/v2/clusters/{cluster}", [&tenancy](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond),
                 [&tenancy, name = req.param("cluster")]() { return empty_or_error(tenancy.delete_cluster(name)); });
  });
}

}  // namespace magnetar::admin
