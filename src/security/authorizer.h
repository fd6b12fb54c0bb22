// Authorization: what a role may do, as Pulsar decides it.
//
//   superuser roles     everything (--superuser-roles)
//   tenant admins       everything inside their tenant (the tenant's
//                       adminRoles): its namespaces, topics, policies,
//                       producing and consuming
//   other roles         produce / consume where a grant gives them that
//                       action: the namespace's permissions or the topic's
//                       own (either one suffices, as in Pulsar)
//   subscriptions       a subscription with roles listed admits only those
//                       roles; in Prefix mode a subscription name must start
//                       with the role (tenant admins are exempt from both)
// Clusters and tenants are created, changed and deleted by superusers only.
// A lookup (finding where a topic lives) needs produce or consume.
//
// Reads come from the PolicyCache (no blocking), so a grant applies a
// moment after the admin call that made it returns.
//
// Threads: any; immutable once made.
#pragma once

#include <set>
#include <string>
#include <string_view>

#include "broker/authorization.h"
#include "broker/naming.h"
#include "broker/policy_cache.h"
#include "common/status.h"

namespace magnetar::security {

using broker::TopicAction;

class Authorizer final : public broker::Authorization {
 public:
  Authorizer(const broker::PolicyCache& policies, std::set<std::string> superusers)
      : policies_(policies), superusers_(std::move(superusers)) {}

  bool is_superuser(const std::string& role) const { return superusers_.count(role) > 0; }
  // Superusers and the tenant's admin roles.
  bool may_administer(const std::string& role, const std::string& tenant) const;
  // OK, or PermissionDenied saying what `role` lacks on `topic`.
  common::Status check(const std::string& role, const broker::TopicName& topic, TopicAction action) const override;
  common::Status check_namespace(const std::string& role, const broker::NamespaceName& ns,
                                 TopicAction action) const override;
  common::Status check_subscription(const std::string& role, const broker::NamespaceName& ns,
                                    std::string_view subscription) const override;
  common::Status check_tenant_admin(const std::string& role, const std::string& tenant) const override;
  common::Status check_superuser(const std::string& role) const override;
  common::Status check_any_grant(const std::string& role, const broker::NamespaceName& ns) const override;

 private:
  const broker::PolicyCache& policies_;
  const std::set<std::string> superusers_;
};

}  // namespace magnetar::security
