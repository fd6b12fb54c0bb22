#include "admin/handlers/policy_routes.h"

#include "admin/handlers/tenancy_common.h"

namespace magnetar::admin {

using broker::NamespacePolicies;
using common::Result;
using common::Status;

bool PolicyRequest::applied() const {
  auto it = query.find("applied");
  return it != query.end() && it->second == "true";
}

Handler policy_handler(broker::Tenancy& tenancy, PolicyWork work) {
  return [&tenancy, work = std::move(work)](HttpRequest& req, Responder respond) {
    run_blocking(tenancy, std::move(respond),
                 [&tenancy, work, r = PolicyRequest{req.params, req.query, req.body}]() { return work(tenancy, r); });
  };
}

Result<Json> required_body(const std::string& body) {
  auto j = parse_json_body(body);
  if (!j.is_ok()) return j.status();
  if (j->is_null()) return Status::invalid_argument("this request needs a JSON body");
  return j;
}

Result<Json> value_to_set(const PolicyRequest& r, const std::string& suffix) {
  auto q = r.query.find(suffix);
  if (q != r.query.end() && r.body.find_first_not_of(" \t\r\n") == std::string::npos) {
    auto j = parse_json_body(q->second);
    if (!j.is_ok()) return Status::invalid_argument("query parameter " + suffix + " is not a JSON value");
    if (j->is_null()) return Status::invalid_argument("query parameter " + suffix + " is empty");
    return j;
  }
  return required_body(r.body);
}

void int_policy(Router& router, broker::Tenancy& tenancy, const PolicyScope& scope, const std::string& suffix,
                std::optional<int32_t> NamespacePolicies::*member) {
  optional_policy<int32_t>(
      router, tenancy, scope, suffix, member, [](const int32_t& v) { return Json(v); },
      [suffix](const Json& j) { return json_int32(j, suffix); });
}

namespace {

// backlogQuotaType=destination_storage (default) or message_age.
Result<std::optional<broker::BacklogQuota> NamespacePolicies::*> quota_member(const PolicyRequest& r) {
  auto it = r.query.find("backlogQuotaType");
  std::string type = it == r.query.end() ? "destination_storage" : it->second;
  if (type == "destination_storage") return &NamespacePolicies::backlog_quota_size;
  if (type == "message_age") return &NamespacePolicies::backlog_quota_age;
  return Status::invalid_argument("backlogQuotaType must be destination_storage or message_age");
}

void register_backlog_quota_routes(Router& router, broker::Tenancy& tenancy, const PolicyScope& scope) {
  router.get(scope.base + "backlogQuotaMap", policy_handler(tenancy, [scope](broker::Tenancy& t, const PolicyRequest& r) {
               auto p = scope.read(t, r);
               if (!p.is_ok()) return error_response(p.status());
               if (r.applied() && scope.inherited) {
                 auto parent = scope.inherited(t, r);
                 if (!parent.is_ok()) return error_response(parent.status());
                 if (!p->backlog_quota_size) p->backlog_quota_size = parent->backlog_quota_size;
                 if (!p->backlog_quota_age) p->backlog_quota_age = parent->backlog_quota_age;
               }
               return HttpResponse::json(200, backlog_quota_map(*p));
             }));
  router.post(scope.base + "backlogQuota", policy_handler(tenancy, [scope](broker::Tenancy& t, const PolicyRequest& r) {
                auto member = quota_member(r);
                if (!member.is_ok()) return error_response(member.status());
                auto j = required_body(r.body);
                if (!j.is_ok()) return error_response(j.status());
                auto q = backlog_quota_from_json(*j);
                if (!q.is_ok()) return error_response(q.status());
                return empty_or_error(scope.update(t, r, [&](NamespacePolicies& p) {
                  p.**member = *q;
                  return Status::ok();
                }));
              }));
  router.del(scope.base + "backlogQuota", policy_handler(tenancy, [scope](broker::Tenancy& t, const PolicyRequest& r) {
               auto member = quota_member(r);
               if (!member.is_ok()) return error_response(member.status());
               return empty_or_error(scope.update(t, r, [&](NamespacePolicies& p) {
                 (p.**member).reset();
                 return Status::ok();
               }));
             }));
}

}  // namespace

void register_shared_policies(Router& router, broker::Tenancy& tenancy, const PolicyScope& scope,
                              const SharedPolicyPaths& paths) {
  using broker::DispatchRate;
  using broker::PersistencePolicy;
  using broker::PublishRate;
  using broker::RetentionPolicy;
  optional_policy<RetentionPolicy>(
      router, tenancy, scope, "retention", &NamespacePolicies::retention,
      [](const RetentionPolicy& v) { return to_json(v); }, retention_from_json, scope.applied_retention);
  optional_policy<PersistencePolicy>(
      router, tenancy, scope, "persistence", &NamespacePolicies::persistence,
      [](const PersistencePolicy& v) { return to_json(v); }, persistence_from_json);
  optional_policy<PublishRate>(
      router, tenancy, scope, "publishRate", &NamespacePolicies::publish_rate,
      [](const PublishRate& v) { return to_json(v); }, publish_rate_from_json);
  optional_policy<DispatchRate>(
      router, tenancy, scope, "dispatchRate", &NamespacePolicies::dispatch_rate,
      [](const DispatchRate& v) { return to_json(v); }, dispatch_rate_from_json);
  optional_policy<DispatchRate>(
      router, tenancy, scope, "subscriptionDispatchRate", &NamespacePolicies::subscription_dispatch_rate,
      [](const DispatchRate& v) { return to_json(v); }, dispatch_rate_from_json);
  optional_policy<bool>(
      router, tenancy, scope, paths.deduplication, &NamespacePolicies::deduplication,
      [](const bool& v) { return Json(v); }, [](const Json& j) { return json_bool(j, "deduplication"); });
  int_policy(router, tenancy, scope, "messageTTL", &NamespacePolicies::message_ttl_seconds);
  int_policy(router, tenancy, scope, paths.max_producers, &NamespacePolicies::max_producers_per_topic);
  int_policy(router, tenancy, scope, paths.max_consumers, &NamespacePolicies::max_consumers_per_topic);
  int_policy(router, tenancy, scope, "maxConsumersPerSubscription", &NamespacePolicies::max_consumers_per_subscription);
  int_policy(router, tenancy, scope, "maxSubscriptionsPerTopic", &NamespacePolicies::max_subscriptions_per_topic);
  optional_policy<int64_t>(
      router, tenancy, scope, "compactionThreshold", &NamespacePolicies::compaction_threshold,
      [](const int64_t& v) { return Json(v); },
      [](const Json& j) -> Result<int64_t> {
        if (!j.is_number_integer() || j.get<int64_t>() < 0) {
          return Status::invalid_argument("compactionThreshold must be a number of bytes, at least 0 (0: off)");
        }
        return j.get<int64_t>();
      });
  register_backlog_quota_routes(router, tenancy, scope);
}

void register_role_permission_routes(Router& router, broker::Tenancy& tenancy, const PolicyScope& scope) {
  router.get(scope.base + "permissions", policy_handler(tenancy, [scope](broker::Tenancy& t, const PolicyRequest& r) {
               auto p = scope.read(t, r);
               if (!p.is_ok()) return error_response(p.status());
               Json out = Json::object();
               for (const auto& [role, actions] : p->permissions) out[role] = actions;
               return HttpResponse::json(200, out);
             }));
  router.post(scope.base + "permissions/{role}",
              policy_handler(tenancy, [scope](broker::Tenancy& t, const PolicyRequest& r) {
                auto j = required_body(r.body);
                if (!j.is_ok()) return error_response(j.status());
                auto actions = json_string_set(*j, "permissions");
                if (!actions.is_ok()) return error_response(actions.status());
                const std::string& role = r.params.at("role");
                return empty_or_error(scope.update(t, r, [&](NamespacePolicies& p) {
                  p.permissions[role] = *actions;
                  return Status::ok();
                }));
              }));
  router.del(scope.base + "permissions/{role}",
             policy_handler(tenancy, [scope](broker::Tenancy& t, const PolicyRequest& r) {
               const std::string& role = r.params.at("role");
               return empty_or_error(scope.update(t, r, [&](NamespacePolicies& p) {
                 if (p.permissions.erase(role) == 0) {
                   return Status::not_found("role '" + role + "' has no permissions here");
                 }
                 return Status::ok();
               }));
             }));
}

}  // namespace magnetar::admin
