// /admin/v2/clusters[/{cluster}]: Pulsar's ClusterData, metadata only.
// /admin/v2/clusters/{cluster}/namespaceIsolationPolicies[/{policy}]:
// Pulsar's NamespaceIsolationData (broker/isolation.h).
#include "admin/handlers.h"
#include "admin/handlers/policy_json.h"
#include "admin/handlers/tenancy_common.h"
#include "broker/isolation.h"

namespace magnetar::admin {

namespace {

Json isolation_json(const broker::IsolationPolicy& p) {
  return Json{{"namespaces", p.namespaces},
              {"primary", p.primary},
              {"secondary", p.secondary},
              {"auto_failover_policy",
               {{"policy_type", "min_available"},
                {"parameters", {{"min_limit", std::to_string(p.min_limit)}, {"usage_threshold", "100"}}}}}};
}

common::Result<broker::IsolationPolicy> isolation_from_json(const Json& j) {
  if (!j.is_object()) return common::Status::invalid_argument("expected a NamespaceIsolationData object");
  broker::IsolationPolicy p;
  auto strings = [&j](const char* field, std::vector<std::string>& out) -> common::Status {
    if (!j.contains(field) || j[field].is_null()) return common::Status::ok();
    if (!j[field].is_array()) return common::Status::invalid_argument(std::string(field) + " must be a list of strings");
    for (const auto& v : j[field]) {
      if (!v.is_string()) return common::Status::invalid_argument(std::string(field) + " must be a list of strings");
      out.push_back(v.get<std::string>());
    }
    return common::Status::ok();
  };
  MAGNETAR_RETURN_IF_ERROR(strings("namespaces", p.namespaces));
  MAGNETAR_RETURN_IF_ERROR(strings("primary", p.primary));
  MAGNETAR_RETURN_IF_ERROR(strings("secondary", p.secondary));
  if (j.contains("auto_failover_policy") && j["auto_failover_policy"].is_object()) {
    const Json& afp = j["auto_failover_policy"];
    if (afp.contains("policy_type") && afp["policy_type"] != "min_available") {
      return common::Status::invalid_argument("auto_failover_policy.policy_type must be min_available");
    }
    if (afp.contains("parameters") && afp["parameters"].is_object() && afp["parameters"].contains("min_limit")) {
      const Json& v = afp["parameters"]["min_limit"];
      std::string text = v.is_string() ? v.get<std::string>() : v.is_number_unsigned() ? v.dump() : "";
      if (text.empty() || text.size() > 6 || text.find_first_not_of("0123456789") != std::string::npos) {
        return common::Status::invalid_argument("auto_failover_policy.parameters.min_limit must be a count");
      }
      p.min_limit = static_cast<uint32_t>(std::stoul(text));
    }
  }
  MAGNETAR_RETURN_IF_ERROR(broker::validate_isolation(p));
  return p;
}

}  // namespace

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

  const std::string isolation = "/admin/v2/clusters/{cluster}/namespaceIsolationPolicies";
  router.get(isolation, [&tenancy](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [&tenancy, cluster = req.param("cluster")]() {
      auto all = tenancy.isolation_policies(cluster);
      if (!all.is_ok()) return error_response(all.status());
      Json out = Json::object();
      for (const auto& [name, p] : *all) out[name] = isolation_json(p);
      return HttpResponse::json(200, out);
    });
  });
  router.get(isolation + "/{policy}", [&tenancy](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [&tenancy, cluster = req.param("cluster"), name = req.param("policy")]() {
      auto all = tenancy.isolation_policies(cluster);
      if (!all.is_ok()) return error_response(all.status());
      auto it = all->find(name);
      if (it == all->end()) return error_response(common::Status::not_found("isolation policy '" + name + "' does not exist"));
      return HttpResponse::json(200, isolation_json(it->second));
    });
  });
  router.post(isolation + "/{policy}", [&tenancy](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond),
                 [&tenancy, cluster = req.param("cluster"), name = req.param("policy"), body = req.body]() {
                   auto j = parse_json_body(body);
                   if (!j.is_ok()) return error_response(j.status());
                   auto p = isolation_from_json(*j);
                   if (!p.is_ok()) return error_response(p.status());
                   return empty_or_error(tenancy.set_isolation_policy(cluster, name, *p));
                 });
  });
  router.del(isolation + "/{policy}", [&tenancy](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [&tenancy, cluster = req.param("cluster"), name = req.param("policy")]() {
      return empty_or_error(tenancy.delete_isolation_policy(cluster, name));
    });
  });
}

}  // namespace magnetar::admin
