// Topic-level policy overrides on Pulsar's paths,
// /admin/v2/{persistent|non-persistent}/{tenant}/{namespace}/{topic}/<policy>:
// retention, messageTTL, backlogQuota(Map), persistence,
// deduplicationEnabled, publishRate, dispatchRate, subscriptionDispatchRate,
// maxProducers, maxConsumers, maxConsumersPerSubscription,
// maxSubscriptionsPerTopic, and permissions (grants that add to the
// namespace's). GET with ?applied=true answers what takes effect:
// the topic's override, else the namespace's policy; for retention, else
// the node's default for the protocol that made the topic, with a
// "source" field saying which (broker/retention.h).
#include "admin/handlers.h"
#include "admin/handlers/policy_routes.h"
#include "admin/handlers/tenancy_common.h"

namespace magnetar::admin {

using broker::NamespacePolicies;
using broker::TopicDomain;
using broker::TopicName;
using common::Result;
using common::Status;

namespace {

PolicyScope topic_scope(TopicDomain domain) {
  auto topic_of = [domain](const PolicyRequest& r) {
    return TopicName::of(domain, r.params.at("tenant"), r.params.at("namespace"), r.params.at("topic"));
  };
  PolicyScope scope;
  scope.base = "/admin/v2/" + std::string(broker::domain_name(domain)) + "/{tenant}/{namespace}/{topic}/";
  scope.read = [topic_of](broker::Tenancy& t, const PolicyRequest& r) -> Result<NamespacePolicies> {
    auto topic = topic_of(r);
    if (!topic.is_ok()) return topic.status();
    return t.get_topic_policies(*topic);
  };
  scope.inherited = [topic_of](broker::Tenancy& t, const PolicyRequest& r) -> Result<NamespacePolicies> {
    auto topic = topic_of(r);
    if (!topic.is_ok()) return topic.status();
    return t.get_policies(topic->ns);
  };
  scope.update = [topic_of](broker::Tenancy& t, const PolicyRequest& r, const PolicyChange& change) -> Status {
    auto topic = topic_of(r);
    if (!topic.is_ok()) return topic.status();
    return t.update_topic_policies(*topic, change);
  };
  scope.applied_retention = [topic_of](broker::Tenancy& t, const PolicyRequest& r) -> Result<Json> {
    auto topic = topic_of(r);
    if (!topic.is_ok()) return topic.status();
    auto in_effect = t.retention_of(*topic);
    if (!in_effect.is_ok()) return in_effect.status();
    // Pulsar's units, rounded up; -1 stays unlimited.
    auto minutes = [](int64_t ms) { return ms < 0 ? -1 : (ms + 59'999) / 60'000; };
    auto mb = [](int64_t bytes) { return bytes < 0 ? -1 : (bytes + (1 << 20) - 1) >> 20; };
    return Json{{"retentionTimeInMinutes", minutes(in_effect->time_ms)},
                {"retentionSizeInMB", mb(in_effect->size_bytes)},
                {"source", std::string(broker::retention_source_name(in_effect->source))}};
  };
  return scope;
}

}  // namespace

void register_topic_policy_routes(Router& router, broker::Tenancy& tenancy) {
  for (TopicDomain d : {TopicDomain::kPersistent, TopicDomain::kNonPersistent}) {
    register_shared_policies(router, tenancy, topic_scope(d), {"deduplicationEnabled", "maxProducers", "maxConsumers"});
    register_role_permission_routes(router, tenancy, topic_scope(d));
  }
  // A topic's own replication clusters narrow (or widen) its namespace's.
  register_replication_routes(router, tenancy, topic_scope(TopicDomain::kPersistent), true);
}

}  // namespace magnetar::admin
