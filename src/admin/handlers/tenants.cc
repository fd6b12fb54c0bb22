// /admin/v2/tenants[/{tenant}]: Pulsar's TenantInfo
// {"adminRoles": [...], "allowedClusters": [...]}, and Magnetar's
// "homeCluster": where the configuration of a tenant that allows several
// clusters is edited (georep/config_sync.h).
// /admin/v2/tenants/{tenant}/limits: the tenant's aggregate limits across
// all its namespaces and topics (a Magnetar extension), e.g.
// {"publishRate": {"publishThrottlingRateInMsg": 1000, "publishThrottlingRateInByte": -1}}.
#include <algorithm>

#include "admin/handlers.h"
#include "admin/handlers/policy_json.h"
#include "admin/handlers/tenancy_common.h"
#include "broker/authorization.h"
#include "broker/tenancy.h"
#include "common/base64.h"

namespace magnetar::admin {

namespace {

// Tenancy thread: every tenant for a superuser (or when no one is
// authenticated), else the tenants `role` administers.
common::Result<std::vector<std::string>> visible_tenants(broker::Tenancy& tenancy, const std::string& role,
                                                         const broker::Authorization* authz) {
  auto tenants = tenancy.list_tenants();
  if (!tenants.is_ok() || authz == nullptr || authz->check_superuser(role).is_ok()) return tenants;
  std::erase_if(*tenants, [&](const std::string& t) { return !authz->check_tenant_admin(role, t).is_ok(); });
  return tenants;
}

}  // namespace

void register_tenant_routes(Router& router, broker::Tenancy& tenancy) {
  router.get("/admin/v2/tenants", [&tenancy](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [&tenancy, role = req.role, authz = req.authorization]() {
      auto tenants = visible_tenants(tenancy, role, authz);
      return tenants.is_ok() ? HttpResponse::json(200, *tenants) : error_response(tenants.status());
    });
  });
  // Who the caller is and what it may manage, for the console to show only
  // that (Magnetar's own).
  router.get("/admin/v2/me", [&tenancy](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [&tenancy, role = req.role, authz = req.authorization]() {
      auto tenants = visible_tenants(tenancy, role, authz);
      if (!tenants.is_ok()) return error_response(tenants.status());
      return HttpResponse::json(200, Json{{"role", authz == nullptr ? Json(nullptr) : Json(role)},
                                          {"authenticated", authz != nullptr},
                                          {"superuser", authz == nullptr || authz->check_superuser(role).is_ok()},
                                          {"tenants", *tenants}});
    });
  });
  router.get("/admin/v2/tenants/{tenant}", [&tenancy](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [&tenancy, name = req.param("tenant")]() {
      auto t = tenancy.get_tenant(name);
      return t.is_ok() ? HttpResponse::json(200, to_json(*t)) : error_response(t.status());
    });
  });
  // PUT creates, POST updates. A create that names no allowedClusters allows
  // the local cluster, as pulsar-admin's "tenants create" does without flags.
  auto write = [&tenancy](bool create) {
    return [&tenancy, create](HttpRequest& req, Responder respond) {
      run_blocking(tenancy, std::move(respond), [&tenancy, create, name = req.param("tenant"), body = req.body]() {
        if (common::Status valid = broker::validate_entity_name(name, "tenant"); create && !valid.is_ok()) {
          return invalid_name_response(valid);
        }
        auto j = parse_json_body(body);
        if (!j.is_ok()) return error_response(j.status());
        if (j->is_null() && !create) return HttpResponse::error(400, "updating a tenant needs a TenantInfo body");
        auto info = tenant_from_json(j->is_null() ? Json::object() : *j);
        if (!info.is_ok()) return error_response(info.status());
        if (create && !j->contains("allowedClusters")) info->allowed_clusters.insert(tenancy.local_cluster());
        if (create) {
          // Made here and allowing other clusters too, its configuration is
          // edited here and sent to them (georep/config_sync.h). One that
          // allows this cluster alone needs no home.
          const bool elsewhere = std::any_of(info->allowed_clusters.begin(), info->allowed_clusters.end(),
                                             [&tenancy](const std::string& c) { return c != tenancy.local_cluster(); });
          if (info->home_cluster.empty() && elsewhere && info->allowed_clusters.count(tenancy.local_cluster()) != 0) {
            info->home_cluster = tenancy.local_cluster();
          }
          if (!info->home_cluster.empty() && info->home_cluster != tenancy.local_cluster()) {
            return HttpResponse::error(409, "tenant '" + name + "' would have its home on cluster '" +
                                                info->home_cluster + "': create it there");
          }
        }
        if (!info->home_cluster.empty() && info->allowed_clusters.count(info->home_cluster) == 0) {
          return HttpResponse::error(400, "homeCluster '" + info->home_cluster + "' is not one of allowedClusters");
        }
        return empty_or_error(create ? tenancy.create_tenant(name, *info) : tenancy.update_tenant(name, *info));
      });
    };
  };
  router.put("/admin/v2/tenants/{tenant}", write(true));
  router.post("/admin/v2/tenants/{tenant}", write(false));
  router.del("/admin/v2/tenants/{tenant}", [&tenancy](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond),
                 [&tenancy, name = req.param("tenant")]() { return empty_or_error(tenancy.delete_tenant(name)); });
  });
  // Configuration sync (georep/config_sync.h): a tenant's home cluster sends
  // its whole configuration here, or says it was deleted. Superusers only
  // (admin_service.cc).
  router.put("/admin/v2/internal/configuration/tenants/{tenant}", [&tenancy](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [&tenancy, name = req.param("tenant"), body = req.body]() {
      auto j = parse_json_body(body);
      if (!j.is_ok()) return error_response(j.status());
      if (!j->is_object() || !j->contains("configuration") || !(*j)["configuration"].is_string()) {
        return HttpResponse::error(400, "a tenant's configuration comes as {\"configuration\": \"<base64>\"}");
      }
      auto bytes = common::base64_decode((*j)["configuration"].get<std::string>());
      if (!bytes.is_ok()) return error_response(bytes.status());
      auto config = broker::decode_configuration(*bytes);
      if (!config.is_ok()) return HttpResponse::error(400, config.status().message());
      return empty_or_error(tenancy.apply_configuration(name, *config));
    });
  });
  router.del("/admin/v2/internal/configuration/tenants/{tenant}", [&tenancy](HttpRequest& req, Responder respond) {
    auto home = req.query.find("home");
    run_blocking(tenancy, std::move(respond), [&tenancy, name = req.param("tenant"),
                                               home = home == req.query.end() ? std::string() : home->second]() {
      return empty_or_error(tenancy.remove_configuration(name, home));
    });
  });
  router.get("/admin/v2/tenants/{tenant}/limits", [&tenancy](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [&tenancy, name = req.param("tenant")]() {
      auto l = tenancy.get_tenant_limits(name);
      return l.is_ok() ? HttpResponse::json(200, to_json(*l)) : error_response(l.status());
    });
  });
  router.post("/admin/v2/tenants/{tenant}/limits", [&tenancy](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [&tenancy, name = req.param("tenant"), body = req.body]() {
      auto j = parse_json_body(body);
      if (!j.is_ok()) return error_response(j.status());
      if (j->is_null()) return HttpResponse::error(400, "setting tenant limits needs a body");
      auto limits = tenant_limits_from_json(*j);
      if (!limits.is_ok()) return error_response(limits.status());
      return empty_or_error(tenancy.set_tenant_limits(name, *limits));
    });
  });
  router.del("/admin/v2/tenants/{tenant}/limits", [&tenancy](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond), [&tenancy, name = req.param("tenant")]() {
      // The tenant must exist, as for the other verbs.
      if (auto t = tenancy.get_tenant(name); !t.is_ok()) return error_response(t.status());
      return empty_or_error(tenancy.remove_tenant_limits(name));
    });
  });
}

}  // namespace magnetar::admin
