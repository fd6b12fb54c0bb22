#include "security/authorizer.h"

namespace magnetar::security {

using common::Status;

bool Authorizer::may_administer(const std::string& role, const std::string& tenant) const {
  if (is_superuser(role)) return true;
  auto info = policies_.tenant(tenant);
  return info != nullptr && info->admin_roles.count(role) > 0;
}

Status Authorizer::check(const std::string& role, const broker::TopicName& topic, TopicAction action) const {
  if (may_administer(role, topic.ns.tenant)) return Status::ok();
  auto effective = policies_.effective(topic);
  if (effective) {
    auto it = effective->permissions.find(role);
    if (it != effective->permissions.end()) {
      const auto& actions = it->second;
      const bool produce = actions.count("produce") > 0;
      const bool consume = actions.count("consume") > 0;
      if ((action == TopicAction::kProduce && produce) || (action == TopicAction::kConsume && consume) ||
          (action == TopicAction::kLookup && (produce || consume))) {
        return Status::ok();
      }
    }
  }
  const char* what = action == TopicAction::kProduce   ? "produce to"
                     : action == TopicAction::kConsume ? "consume from"
                                                       : "look up";
  return Status::permission_denied("role '" + role + "' may not " + what + " " + topic.to_string());
}

Status Authorizer::check_tenant_admin(const std::string& role, const std::string& tenant) const {
  if (may_administer(role, tenant)) return Status::ok();
  return Status::permission_denied("role '" + role + "' is not an admin of tenant '" + tenant + "'");
}

Status Authorizer::check_superuser(const std::string& role) const {
  if (is_superuser(role)) return Status::ok();
  return Status::permission_denied("role '" + role + "' is not a superuser");
}

}  // namespace magnetar::security
