// Policy routes shared by namespaces and topics: GET answers a policy (JSON
// null when unset), POST sets it (204), DELETE unsets it (204). A Scope says
// where the policies of a route live; the same field helpers then serve
// /admin/v2/namespaces/{tenant}/{namespace}/<policy> and
// /admin/v2/{domain}/{tenant}/{namespace}/{topic}/<policy>.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "admin/handlers/policy_json.h"
#include "admin/handlers/tenancy_common.h"
#include "admin/router.h"
#include "broker/tenancy.h"

namespace magnetar::admin {

// What a policy handler needs from the request, copied off the connection.
struct PolicyRequest {
  std::map<std::string, std::string> params;
  std::map<std::string, std::string> query;
  std::string body;
  // True for ?applied=true: answer what takes effect, inherited values included.
  bool applied() const;
};

using PolicyChange = std::function<common::Status(broker::NamespacePolicies&)>;

struct PolicyScope {
  std::string base;  // route prefix ending in '/'
  // The policies the route addresses. Errors: InvalidArgument (names),
  // NotFound.
  std::function<common::Result<broker::NamespacePolicies>(broker::Tenancy&, const PolicyRequest&)> read;
  // What applies where `read` leaves a field unset; null when nothing is
  // inherited.
  std::function<common::Result<broker::NamespacePolicies>(broker::Tenancy&, const PolicyRequest&)> inherited;
  std::function<common::Status(broker::Tenancy&, const PolicyRequest&, const PolicyChange&)> update;
  // ?applied=true of retention: what is in effect, with where it comes
  // from (broker/retention.h); null: the policy set, else `inherited`'s.
  std::function<common::Result<Json>(broker::Tenancy&, const PolicyRequest&)> applied_retention;
};

using PolicyWork = std::function<HttpResponse(broker::Tenancy&, const PolicyRequest&)>;
// A handler that copies the request and runs `work` on the tenancy thread.
Handler policy_handler(broker::Tenancy& tenancy, PolicyWork work);

// A body that must be present and JSON (400 otherwise).
common::Result<Json> required_body(const std::string& body);
// The value to set: the JSON body, or, when the body is empty, the query
// parameter named `suffix` (pulsar-admin sends a topic's messageTTL as
// ?messageTTL=60).
common::Result<Json> value_to_set(const PolicyRequest& r, const std::string& suffix);

// GET / POST / DELETE <scope.base><suffix> for one optional field.
template <typename T>
void optional_policy(Router& router, broker::Tenancy& tenancy, const PolicyScope& scope, const std::string& suffix,
                     std::optional<T> broker::NamespacePolicies::*member, std::function<Json(const T&)> to,
                     std::function<common::Result<T>(const Json&)> from,
                     std::function<common::Result<Json>(broker::Tenancy&, const PolicyRequest&)> applied = nullptr) {
  std::string path = scope.base + suffix;
  router.get(path, policy_handler(tenancy, [scope, member, to, applied](broker::Tenancy& t, const PolicyRequest& r) {
               if (r.applied() && applied) {
                 auto v = applied(t, r);
                 return v.is_ok() ? HttpResponse::json(200, *v) : error_response(v.status());
               }
               auto p = scope.read(t, r);
               if (!p.is_ok()) return error_response(p.status());
               std::optional<T> v = (*p).*member;
               if (!v && r.applied() && scope.inherited) {
                 auto parent = scope.inherited(t, r);
                 if (!parent.is_ok()) return error_response(parent.status());
                 v = (*parent).*member;
               }
               return HttpResponse::json(200, v ? to(*v) : Json(nullptr));
             }));
  router.post(path, policy_handler(tenancy, [scope, suffix, member, from](broker::Tenancy& t, const PolicyRequest& r) {
                auto j = value_to_set(r, suffix);
                if (!j.is_ok()) return error_response(j.status());
                auto v = from(*j);
                if (!v.is_ok()) return error_response(v.status());
                return empty_or_error(scope.update(t, r, [&](broker::NamespacePolicies& p) {
                  p.*member = *v;
                  return common::Status::ok();
                }));
              }));
  router.del(path, policy_handler(tenancy, [scope, member](broker::Tenancy& t, const PolicyRequest& r) {
               return empty_or_error(scope.update(t, r, [&](broker::NamespacePolicies& p) {
                 (p.*member).reset();
                 return common::Status::ok();
               }));
             }));
}

// An optional field holding one 32-bit integer.
void int_policy(Router& router, broker::Tenancy& tenancy, const PolicyScope& scope, const std::string& suffix,
                std::optional<int32_t> broker::NamespacePolicies::*member);

// The policies namespaces and topics share, with the sub-paths Pulsar gives
// them in each scope.
struct SharedPolicyPaths {
  std::string deduplication;          // "deduplication" / "deduplicationEnabled"
  std::string max_producers;          // "maxProducersPerTopic" / "maxProducers"
  std::string max_consumers;          // "maxConsumersPerTopic" / "maxConsumers"
};
// retention, messageTTL, persistence, deduplication, publishRate,
// dispatchRate, subscriptionDispatchRate, the per-topic limits, backlogQuota
// and backlogQuotaMap.
// {base}permissions: GET the roles' granted actions; POST
// permissions/{role} ["produce", "consume", ...] grants (replacing what the
// role had); DELETE permissions/{role} revokes. A namespace's grants cover
// its topics; a topic's add to them.
void register_role_permission_routes(Router& router, broker::Tenancy& tenancy, const PolicyScope& scope);
// GET/POST `replication` (the replication clusters) under the scope; with
// `with_delete`, DELETE too, which clears the scope's own list (a topic's:
// its namespace's applies again).
void register_replication_routes(Router& router, broker::Tenancy& tenancy, const PolicyScope& scope, bool with_delete);

void register_shared_policies(Router& router, broker::Tenancy& tenancy, const PolicyScope& scope,
                              const SharedPolicyPaths& paths);

}  // namespace magnetar::admin
