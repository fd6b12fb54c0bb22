#include "security/authorizer.h"

namespace magnetar::security {

using common::Status;

bool Authorizer::may_administer(const std::string& role, const std::string& tenant) const {
  if (is_superuser(role)) return true;
  auto info = policies_.tenant(tenant);
  return info != nullptr && info->admin_roles.count(role) > 0;
}

namespace {

bool grants(const broker::NamespacePolicies* p, const std::string& role, TopicAction action) {
  if (p == nullptr) return false;
  auto it = p->permissions.find(role);
  if (it == p->permissions.end()) return false;
  const bool produce = it->second.count("produce") > 0;
  const bool consume = it->second.count("consume") > 0;
  switch (action) {
    case TopicAction::kProduce: return produce;
    case TopicAction::kConsume: return consume;
    case TopicAction::kLookup: return produce || consume;
  }
  return false;
}

std::string_view verb(TopicAction action) {
  switch (action) {
    case TopicAction::kProduce: return "produce to";
    case TopicAction::kConsume: return "consume from";
    case TopicAction::kLookup: return "look up";
  }
  return "use";
}

}  // namespace

Status Authorizer::check(const std::string& role, const broker::TopicName& topic, TopicAction action) const {
  if (may_administer(role, topic.ns.tenant)) return Status::ok();
  // Shared pointers into the cache: nothing is copied on this path.
  if (grants(policies_.namespace_policies(topic.ns).get(), role, action) ||
      grants(policies_.topic_policies(topic).get(), role, action) ||
      (topic.is_partition() && grants(policies_.topic_policies(topic.base()).get(), role, action))) {
    return Status::ok();
  }
  return Status::permission_denied("role '" + role + "' may not " + std::string(verb(action)) + " " + topic.to_string());
}

Status Authorizer::check_namespace(const std::string& role, const broker::NamespaceName& ns, TopicAction action) const {
  if (may_administer(role, ns.tenant) || grants(policies_.namespace_policies(ns).get(), role, action)) {
    return Status::ok();
  }
  return Status::permission_denied("role '" + role + "' may not " + std::string(verb(action)) + " namespace " +
                                   ns.to_string());
}

Status Authorizer::check_subscription(const std::string& role, const broker::NamespaceName& ns,
                                      std::string_view subscription) const {
  if (may_administer(role, ns.tenant)) return Status::ok();
  auto p = policies_.namespace_policies(ns);
  if (p == nullptr) return Status::ok();  // the topic check that follows refuses
  if (p->subscription_auth_mode == broker::SubscriptionAuthMode::kPrefix && !subscription.starts_with(role)) {
    return Status::permission_denied("subscription '" + std::string(subscription) +
                                     "' must be prefixed by the role, like '" + role + "-...', in " + ns.to_string());
  }
  auto it = p->subscription_roles.find(std::string(subscription));
  if (it != p->subscription_roles.end() && !it->second.empty() && it->second.count(role) == 0) {
    return Status::permission_denied("role '" + role + "' may not use subscription '" + std::string(subscription) +
                                     "' in " + ns.to_string());
  }
  return Status::ok();
}

Status Authorizer::check_tenant_admin(const std::string& role, const std::string& tenant) const {
  if (may_administer(role, tenant)) return Status::ok();
  return Status::permission_denied("role '" + role + "' is not an admin of tenant '" + tenant + "'");
}

Status Authorizer::check_any_grant(const std::string& role, const broker::NamespaceName& ns) const {
  if (may_administer(role, ns.tenant) || grants(policies_.namespace_policies(ns).get(), role, TopicAction::kLookup)) {
    return Status::ok();
  }
  for (const auto& topic : policies_.topic_overrides(ns)) {
    if (grants(topic.get(), role, TopicAction::kLookup)) return Status::ok();
  }
  return Status::permission_denied("role '" + role + "' has no permission in namespace " + ns.to_string());
}

Status Authorizer::check_superuser(const std::string& role) const {
  if (is_superuser(role)) return Status::ok();
  return Status::permission_denied("role '" + role + "' is not a superuser");
}

}  // namespace magnetar::security
