// Namespace policy sub-paths, /admin/v2/namespaces/{tenant}/{namespace}/...
// GET answers the policy (JSON null when unset), POST sets it (204), DELETE
// clears it back to the broker default (204). Every change is validated as a
// whole before it is written; a refused change writes nothing.
#include "admin/handlers.h"
#include "admin/handlers/policy_json.h"
#include "admin/handlers/tenancy_common.h"

namespace magnetar::admin {

using broker::NamespaceName;
using broker::NamespacePolicies;
using common::Result;
using common::Status;

namespace {

constexpr const char* kBase = "/admin/v2/namespaces/{tenant}/{namespace}/";

// What a policy handler needs from the request, copied off the connection.
struct PolicyRequest {
  NamespaceName ns;
  std::string body;
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> params;
};

using PolicyWork = std::function<HttpResponse(broker::Tenancy&, const PolicyRequest&)>;

Handler policy_handler(broker::Tenancy& tenancy, PolicyWork work) {
  return [&tenancy, work = std::move(work)](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond),
                 [&tenancy, work, t = req.param("tenant"), n = req.param("namespace"), body = req.body,
                  query = req.query, params = req.params]() {
                   auto ns = NamespaceName::of(t, n);
                   if (!ns.is_ok()) return error_response(ns.status());
                   return work(tenancy, PolicyRequest{*ns, body, query, params});
                 });
  };
}

// A body that must be present and JSON.
Result<Json> required_body(const std::string& body) {
  auto j = parse_json_body(body);
  if (!j.is_ok()) return j.status();
  if (j->is_null()) return Status::invalid_argument("this request needs a JSON body");
  return j;
}

HttpResponse change(broker::Tenancy& tenancy, const NamespaceName& ns,
                    const std::function<Status(NamespacePolicies&)>& fn) {
  return empty_or_error(tenancy.update_policies(ns, fn));
}

// GET / POST / DELETE for one optional policy field.
template <typename T>
void optional_policy(Router& router, broker::Tenancy& tenancy, const std::string& suffix,
                     std::optional<T> NamespacePolicies::*member, std::function<Json(const T&)> to,
                     std::function<Result<T>(const Json&)> from) {
  std::string path = kBase + suffix;
  router.get(path, policy_handler(tenancy, [member, to](broker::Tenancy& t, const PolicyRequest& r) {
               auto p = t.get_policies(r.ns);
               if (!p.is_ok()) return error_response(p.status());
               const auto& v = (*p).*member;
               return HttpResponse::json(200, v ? to(*v) : Json(nullptr));
             }));
  router.post(path, policy_handler(tenancy, [member, from](broker::Tenancy& t, const PolicyRequest& r) {
                auto j = required_body(r.body);
                if (!j.is_ok()) return error_response(j.status());
                auto v = from(*j);
                if (!v.is_ok()) return error_response(v.status());
                return change(t, r.ns, [&](NamespacePolicies& p) {
                  p.*member = *v;
                  return Status::ok();
                });
              }));
  router.del(path, policy_handler(tenancy, [member](broker::Tenancy& t, const PolicyRequest& r) {
               return change(t, r.ns, [&](NamespacePolicies& p) {
                 (p.*member).reset();
                 return Status::ok();
               });
             }));
}

void int_policy(Router& router, broker::Tenancy& tenancy, const std::string& suffix,
                std::optional<int32_t> NamespacePolicies::*member) {
  optional_policy<int32_t>(
      router, tenancy, suffix, member, [](const int32_t& v) { return Json(v); },
      [suffix](const Json& j) { return json_int32(j, suffix); });
}

// backlogQuotaType=destination_storage (default) or message_age.
Result<std::optional<broker::BacklogQuota> NamespacePolicies::*> quota_member(const PolicyRequest& r) {
  auto it = r.query.find("backlogQuotaType");
  std::string type = it == r.query.end() ? "destination_storage" : it->second;
  if (type == "destination_storage") return &NamespacePolicies::backlog_quota_size;
  if (type == "message_age") return &NamespacePolicies::backlog_quota_age;
  return Status::invalid_argument("backlogQuotaType must be destination_storage or message_age");
}

void register_backlog_quota_routes(Router& router, broker::Tenancy& tenancy) {
  router.get(std::string(kBase) + "backlogQuotaMap",
             policy_handler(tenancy, [](broker::Tenancy& t, const PolicyRequest& r) {
               auto p = t.get_policies(r.ns);
               return p.is_ok() ? HttpResponse::json(200, backlog_quota_map(*p)) : error_response(p.status());
             }));
  router.post(std::string(kBase) + "backlogQuota",
              policy_handler(tenancy, [](broker::Tenancy& t, const PolicyRequest& r) {
                auto member = quota_member(r);
                if (!member.is_ok()) return error_response(member.status());
                auto j = required_body(r.body);
                if (!j.is_ok()) return error_response(j.status());
                auto q = backlog_quota_from_json(*j);
                if (!q.is_ok()) return error_response(q.status());
                return change(t, r.ns, [&](NamespacePolicies& p) {
                  p.**member = *q;
                  return Status::ok();
                });
              }));
  router.del(std::string(kBase) + "backlogQuota",
             policy_handler(tenancy, [](broker::Tenancy& t, const PolicyRequest& r) {
               auto member = quota_member(r);
               if (!member.is_ok()) return error_response(member.status());
               return change(t, r.ns, [&](NamespacePolicies& p) {
                 (p.**member).reset();
                 return Status::ok();
               });
             }));
}

void register_permission_routes(Router& router, broker::Tenancy& tenancy) {
  router.get(std::string(kBase) + "permissions",
             policy_handler(tenancy, [](broker::Tenancy& t, const PolicyRequest& r) {
               auto p = t.get_policies(r.ns);
               if (!p.is_ok()) return error_response(p.status());
               Json out = Json::object();
               for (const auto& [role, actions] : p->permissions) out[role] = actions;
               return HttpResponse::json(200, out);
             }));
  router.post(std::string(kBase) + "permissions/{role}",
              policy_handler(tenancy, [](broker::Tenancy& t, const PolicyRequest& r) {
                auto j = required_body(r.body);
                if (!j.is_ok()) return error_response(j.status());
                auto actions = json_string_set(*j, "permissions");
                if (!actions.is_ok()) return error_response(actions.status());
                const std::string& role = r.params.at("role");
                return change(t, r.ns, [&](NamespacePolicies& p) {
                  p.permissions[role] = *actions;
                  return Status::ok();
                });
              }));
  router.del(std::string(kBase) + "permissions/{role}",
             policy_handler(tenancy, [](broker::Tenancy& t, const PolicyRequest& r) {
               const std::string& role = r.params.at("role");
               return change(t, r.ns, [&](NamespacePolicies& p) {
                 if (p.permissions.erase(role) == 0) {
                   return Status::not_found("role '" + role + "' has no permissions on " + r.ns.to_string());
                 }
                 return Status::ok();
               });
             }));
}

void register_replication_routes(Router& router, broker::Tenancy& tenancy) {
  router.get(std::string(kBase) + "replication",
             policy_handler(tenancy, [](broker::Tenancy& t, const PolicyRequest& r) {
               auto p = t.get_policies(r.ns);
               return p.is_ok() ? HttpResponse::json(200, p->replication_clusters) : error_response(p.status());
             }));
  router.post(std::string(kBase) + "replication",
              policy_handler(tenancy, [](broker::Tenancy& t, const PolicyRequest& r) {
                auto j = required_body(r.body);
                if (!j.is_ok()) return error_response(j.status());
                auto clusters = json_string_set(*j, "replication");
                if (!clusters.is_ok()) return error_response(clusters.status());
                auto tenant = t.get_tenant(r.ns.tenant);
                if (!tenant.is_ok()) return error_response(tenant.status());
                for (const auto& c : *clusters) {
                  if (!tenant->allowed_clusters.count(c)) {
                    return error_response(Status::failed_precondition("cluster '" + c + "' is not allowed for tenant '" +
                                                                      r.ns.tenant + "'"));
                  }
                }
                return change(t, r.ns, [&](NamespacePolicies& p) {
                  p.replication_clusters = *clusters;
                  return Status::ok();
                });
              }));
}

}  // namespace

void register_namespace_policy_routes(Router& router, broker::Tenancy& tenancy) {
  using broker::AutoTopicCreation;
  using broker::DispatchRate;
  using broker::PersistencePolicy;
  using broker::PublishRate;
  using broker::RetentionPolicy;
  optional_policy<RetentionPolicy>(
      router, tenancy, "retention", &NamespacePolicies::retention,
      [](const RetentionPolicy& v) { return to_json(v); }, retention_from_json);
  optional_policy<PersistencePolicy>(
      router, tenancy, "persistence", &NamespacePolicies::persistence,
      [](const PersistencePolicy& v) { return to_json(v); }, persistence_from_json);
  optional_policy<PublishRate>(
      router, tenancy, "publishRate", &NamespacePolicies::publish_rate,
      [](const PublishRate& v) { return to_json(v); }, publish_rate_from_json);
  optional_policy<DispatchRate>(
      router, tenancy, "dispatchRate", &NamespacePolicies::dispatch_rate,
      [](const DispatchRate& v) { return to_json(v); }, dispatch_rate_from_json);
  optional_policy<DispatchRate>(
      router, tenancy, "subscriptionDispatchRate", &NamespacePolicies::subscription_dispatch_rate,
      [](const DispatchRate& v) { return to_json(v); }, dispatch_rate_from_json);
  optional_policy<AutoTopicCreation>(
      router, tenancy, "autoTopicCreation", &NamespacePolicies::auto_topic_creation,
      [](const AutoTopicCreation& v) { return to_json(v); }, auto_topic_creation_from_json);
  optional_policy<bool>(
      router, tenancy, "deduplication", &NamespacePolicies::deduplication, [](const bool& v) { return Json(v); },
      [](const Json& j) { return json_bool(j, "deduplication"); });
  int_policy(router, tenancy, "messageTTL", &NamespacePolicies::message_ttl_seconds);
  int_policy(router, tenancy, "maxProducersPerTopic", &NamespacePolicies::max_producers_per_topic);
  int_policy(router, tenancy, "maxConsumersPerTopic", &NamespacePolicies::max_consumers_per_topic);
  int_policy(router, tenancy, "maxConsumersPerSubscription", &NamespacePolicies::max_consumers_per_subscription);
  int_policy(router, tenancy, "maxSubscriptionsPerTopic", &NamespacePolicies::max_subscriptions_per_topic);
  int_policy(router, tenancy, "maxTopicsPerNamespace", &NamespacePolicies::max_topics_per_namespace);
  int_policy(router, tenancy, "subscriptionExpirationTime", &NamespacePolicies::subscription_expiration_minutes);
  register_backlog_quota_routes(router, tenancy);
  register_permission_routes(router, tenancy);
  register_replication_routes(router, tenancy);
}

}  // namespace magnetar::admin
