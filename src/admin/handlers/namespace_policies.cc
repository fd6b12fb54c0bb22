// Namespace policy sub-paths, /admin/v2/namespaces/{tenant}/{namespace}/...
// (see policy_routes.h for GET/POST/DELETE). Every change is validated as a
// whole before it is written; a refused change writes nothing.
#include "admin/handlers.h"
#include "admin/handlers/policy_routes.h"
#include "admin/handlers/tenancy_common.h"

namespace magnetar::admin {

using broker::NamespaceName;
using broker::NamespacePolicies;
using common::Result;
using common::Status;

namespace {

// Comma-separated storage group names, as `--storage-group` spells them.
Result<std::string> storage_groups(const Json& j, const char* field, bool required) {
  if (!j.contains(field) || j[field].is_null()) {
    if (required) return Status::invalid_argument(std::string(field) + " is required");
    return std::string();
  }
  if (!j[field].is_string()) return Status::invalid_argument(std::string(field) + " must be a string");
  const std::string groups = j[field].get<std::string>();
  if (required && groups.empty()) return Status::invalid_argument(std::string(field) + " names no storage group");
  for (char ch : groups) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.' && ch != ',') {
      return Status::invalid_argument(std::string(field) + ": storage group names have letters, digits, '-', '_' "
                                      "and '.', separated by commas");
    }
  }
  return groups;
}

Result<broker::BookieAffinityGroup> bookie_affinity_from_json(const Json& j) {
  if (!j.is_object()) {
    return Status::invalid_argument("a bookie affinity group is {\"bookkeeperAffinityGroupPrimary\": \"g1\", "
                                    "\"bookkeeperAffinityGroupSecondary\": \"g2\"}");
  }
  auto primary = storage_groups(j, "bookkeeperAffinityGroupPrimary", true);
  if (!primary.is_ok()) return primary.status();
  auto secondary = storage_groups(j, "bookkeeperAffinityGroupSecondary", false);
  if (!secondary.is_ok()) return secondary.status();
  return broker::BookieAffinityGroup{*primary, *secondary};
}

Result<NamespaceName> namespace_of(const PolicyRequest& r) {
  return NamespaceName::of(r.params.at("tenant"), r.params.at("namespace"));
}

PolicyScope namespace_scope() {
  PolicyScope scope;
  scope.base = "/admin/v2/namespaces/{tenant}/{namespace}/";
  scope.read = [](broker::Tenancy& t, const PolicyRequest& r) -> Result<NamespacePolicies> {
    auto ns = namespace_of(r);
    if (!ns.is_ok()) return ns.status();
    return t.get_policies(*ns);
  };
  scope.update = [](broker::Tenancy& t, const PolicyRequest& r, const PolicyChange& change) -> Status {
    auto ns = namespace_of(r);
    if (!ns.is_ok()) return ns.status();
    return t.update_policies(*ns, change);
  };
  return scope;
}

void register_permission_routes(Router& router, broker::Tenancy& tenancy, const PolicyScope& scope) {
  register_role_permission_routes(router, tenancy, scope);
  // Subscription-level permission, as Pulsar serves it.
  router.get(scope.base + "permissions/subscription",
             policy_handler(tenancy, [scope](broker::Tenancy& t, const PolicyRequest& r) {
               auto p = scope.read(t, r);
               if (!p.is_ok()) return error_response(p.status());
               Json out = Json::object();
               for (const auto& [subscription, roles] : p->subscription_roles) out[subscription] = roles;
               return HttpResponse::json(200, out);
             }));
  router.post(scope.base + "permissions/subscription/{subscription}",
              policy_handler(tenancy, [scope](broker::Tenancy& t, const PolicyRequest& r) {
                auto j = required_body(r.body);
                if (!j.is_ok()) return error_response(j.status());
                auto roles = json_string_set(*j, "roles");
                if (!roles.is_ok()) return error_response(roles.status());
                if (roles->empty()) return error_response(Status::invalid_argument("roles must name at least one role"));
                const std::string& subscription = r.params.at("subscription");
                return empty_or_error(scope.update(t, r, [&](NamespacePolicies& p) {
                  p.subscription_roles[subscription].insert(roles->begin(), roles->end());
                  return Status::ok();
                }));
              }));
  router.del(scope.base + "permissions/{subscription}/{role}",
             policy_handler(tenancy, [scope](broker::Tenancy& t, const PolicyRequest& r) {
               const std::string& subscription = r.params.at("subscription");
               const std::string& role = r.params.at("role");
               return empty_or_error(scope.update(t, r, [&](NamespacePolicies& p) {
                 auto it = p.subscription_roles.find(subscription);
                 if (it == p.subscription_roles.end() || it->second.erase(role) == 0) {
                   return Status::not_found("role '" + role + "' has no permission on subscription '" + subscription +
                                            "'");
                 }
                 // The last role gone, the subscription is open again as Pulsar leaves it.
                 if (it->second.empty()) p.subscription_roles.erase(it);
                 return Status::ok();
               }));
             }));
  optional_policy<broker::SubscriptionAuthMode>(
      router, tenancy, scope, "subscriptionAuthMode", &NamespacePolicies::subscription_auth_mode,
      [](const broker::SubscriptionAuthMode& m) { return Json(std::string(broker::subscription_auth_mode_name(m))); },
      [](const Json& j) -> Result<broker::SubscriptionAuthMode> {
        if (!j.is_string()) return Status::invalid_argument("subscriptionAuthMode must be \"None\" or \"Prefix\"");
        return broker::parse_subscription_auth_mode(j.get<std::string>());
      });
}

}  // namespace

void register_replication_routes(Router& router, broker::Tenancy& tenancy, const PolicyScope& scope, bool with_delete) {
  router.get(scope.base + "replication", policy_handler(tenancy, [scope](broker::Tenancy& t, const PolicyRequest& r) {
               auto p = scope.read(t, r);
               return p.is_ok() ? HttpResponse::json(200, p->replication_clusters) : error_response(p.status());
             }));
  router.post(scope.base + "replication", policy_handler(tenancy, [scope](broker::Tenancy& t, const PolicyRequest& r) {
                auto ns = namespace_of(r);
                if (!ns.is_ok()) return error_response(ns.status());
                auto j = required_body(r.body);
                if (!j.is_ok()) return error_response(j.status());
                auto clusters = json_string_set(*j, "replication");
                if (!clusters.is_ok()) return error_response(clusters.status());
                auto tenant = t.get_tenant(ns->tenant);
                if (!tenant.is_ok()) return error_response(tenant.status());
                for (const auto& c : *clusters) {
                  if (!tenant->allowed_clusters.count(c)) {
                    return error_response(
                        Status::failed_precondition("cluster '" + c + "' is not allowed for tenant '" + ns->tenant + "'"));
                  }
                }
                return empty_or_error(scope.update(t, r, [&](NamespacePolicies& p) {
                  p.replication_clusters = *clusters;
                  return Status::ok();
                }));
              }));
  if (!with_delete) return;
  router.del(scope.base + "replication", policy_handler(tenancy, [scope](broker::Tenancy& t, const PolicyRequest& r) {
               return empty_or_error(scope.update(t, r, [](NamespacePolicies& p) {
                 p.replication_clusters.clear();  // the namespace's list applies again
                 return Status::ok();
               }));
             }));
}


void register_namespace_policy_routes(Router& router, broker::Tenancy& tenancy) {
  PolicyScope scope = namespace_scope();
  register_shared_policies(router, tenancy, scope, {"deduplication", "maxProducersPerTopic", "maxConsumersPerTopic"});
  int_policy(router, tenancy, scope, "maxTopicsPerNamespace", &NamespacePolicies::max_topics_per_namespace);
  int_policy(router, tenancy, scope, "maxUnackedMessagesPerConsumer",
             &NamespacePolicies::max_unacked_messages_per_consumer);
  int_policy(router, tenancy, scope, "maxUnackedMessagesPerSubscription",
             &NamespacePolicies::max_unacked_messages_per_subscription);
  int_policy(router, tenancy, scope, "subscriptionExpirationTime", &NamespacePolicies::subscription_expiration_minutes);
  optional_policy<broker::AutoTopicCreation>(
      router, tenancy, scope, "autoTopicCreation", &NamespacePolicies::auto_topic_creation,
      [](const broker::AutoTopicCreation& v) { return to_json(v); }, auto_topic_creation_from_json);
  optional_policy<broker::TracingPolicy>(
      router, tenancy, scope, "tracing", &NamespacePolicies::tracing,
      [](const broker::TracingPolicy& v) { return to_json(v); }, tracing_from_json);
  // Pulsar's bookie affinity group: the storage groups the namespace's ledgers' copies are kept in.
  optional_policy<broker::BookieAffinityGroup>(
      router, tenancy, scope, "persistence/bookieAffinity", &NamespacePolicies::bookie_affinity,
      [](const broker::BookieAffinityGroup& v) {
        return Json{{"bookkeeperAffinityGroupPrimary", v.primary},
                    {"bookkeeperAffinityGroupSecondary", v.secondary}};
      },
      bookie_affinity_from_json);
  register_permission_routes(router, tenancy, scope);
  register_replication_routes(router, tenancy, scope, false);
}

}  // namespace magnetar::admin
