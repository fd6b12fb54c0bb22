// /admin/v2/namespaces/{tenant}[/{namespace}]: list, create (optionally with
// a Pulsar Policies body), read all policies, delete, list topics.
#include "admin/handlers.h"
#include "admin/handlers/policy_json.h"
#include "admin/handlers/tenancy_common.h"

namespace magnetar::admin {

void register_namespace_routes(Router& router, broker::Tenancy& tenancy) {
  router.get("/admin/v2/namespaces/{tenant}", [&tenancy](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [&tenancy, tenant = req.param("tenant")]() {
      auto list = tenancy.list_namespaces(tenant);
      return list.is_ok() ? HttpResponse::json(200, *list) : error_response(list.status());
    });
  });
  router.put("/admin/v2/namespaces/{tenant}/{namespace}", [&tenancy](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond),
                 [&tenancy, t = req.param("tenant"), n = req.param("namespace"), body = req.body]() {
                   auto ns = broker::NamespaceName::of(t, n);
                   if (!ns.is_ok()) return invalid_name_response(ns.status());
                   auto j = parse_json_body(body);
                   if (!j.is_ok()) return error_response(j.status());
                   auto policies = policies_from_json(*j);
                   if (!policies.is_ok()) return error_response(policies.status());
                   // A namespace replicates to the local cluster unless told otherwise.
                   if (policies->replication_clusters.empty()) {
                     policies->replication_clusters.insert(tenancy.local_cluster());
                   }
                   return empty_or_error(tenancy.create_namespace(*ns, *policies));
                 });
  });
  router.get("/admin/v2/namespaces/{tenant}/{namespace}", [&tenancy](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [&tenancy, t = req.param("tenant"), n = req.param("namespace")]() {
      auto ns = broker::NamespaceName::of(t, n);
      if (!ns.is_ok()) return error_response(ns.status());
      auto p = tenancy.get_policies(*ns);
      if (!p.is_ok()) return error_response(p.status());
      Json out = to_json(*p, tenancy.local_cluster());
      out["bundles"] = bundles_json(*ns);
      return HttpResponse::json(200, out);
    });
  });
  router.del("/admin/v2/namespaces/{tenant}/{namespace}", [&tenancy](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [&tenancy, t = req.param("tenant"), n = req.param("namespace")]() {
      auto ns = broker::NamespaceName::of(t, n);
      if (!ns.is_ok()) return error_response(ns.status());
      return empty_or_error(tenancy.delete_namespace(*ns));
    });
  });
  router.get("/admin/v2/namespaces/{tenant}/{namespace}/topics", [&tenancy](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [&tenancy, t = req.param("tenant"), n = req.param("namespace")]() {
      auto ns = broker::NamespaceName::of(t, n);
      if (!ns.is_ok()) return error_response(ns.status());
      std::vector<std::string> all;
      for (auto d : {broker::TopicDomain::kPersistent, broker::TopicDomain::kNonPersistent}) {
        auto topics = tenancy.list_topics(*ns, d);
        if (!topics.is_ok()) return error_response(topics.status());
        all.insert(all.end(), topics->begin(), topics->end());
      }
      return HttpResponse::json(200, all);
    });
  });
}

}  // namespace magnetar::admin
