// Authorization: what a client's role may do. Every protocol asks the same
// Authorization before a produce, a subscribe (or fetch) and a lookup, and
// the REST API before each admin call. The default allows everything
// (authorization off); security/authorizer.h decides as Pulsar does.
//
// Threads: any; implementations must not block.
#pragma once

#include <string>
#include <string_view>

#include "broker/naming.h"
#include "common/status.h"

namespace magnetar::broker {

enum class TopicAction { kProduce, kConsume, kLookup };

class Authorization {
 public:
  virtual ~Authorization() = default;
  // OK, or PermissionDenied saying what `role` lacks.
  virtual common::Status check(const std::string& role, const TopicName& topic, TopicAction action) const = 0;
  // What the namespace's own grants allow (not a topic's): AMQP exchanges
  // and bindings, which belong to no one topic.
  virtual common::Status check_namespace(const std::string& role, const NamespaceName& ns,
                                         TopicAction action) const = 0;
  // The namespace's rules for subscription names (Pulsar's subscription
  // roles and subscription_auth_mode); a consumer also needs kConsume on the
  // topic. Kafka asks it for a consumer group, which spans topics.
  virtual common::Status check_subscription(const std::string& role, const NamespaceName& ns,
                                            std::string_view subscription) const = 0;
  virtual common::Status check_tenant_admin(const std::string& role, const std::string& tenant) const = 0;
  virtual common::Status check_superuser(const std::string& role) const = 0;
  // OK when `role` may do anything at all in `ns`: its tenant's admins, a
  // produce or consume grant on the namespace or on any topic of it (AMQP
  // opens a vhost only then, as RabbitMQ needs a permission on it).
  virtual common::Status check_any_grant(const std::string& role, const NamespaceName& ns) const = 0;
};

class AllowAllAuthorization final : public Authorization {
 public:
  common::Status check(const std::string&, const TopicName&, TopicAction) const override { return common::Status::ok(); }
  common::Status check_namespace(const std::string&, const NamespaceName&, TopicAction) const override {
    return common::Status::ok();
  }
  common::Status check_subscription(const std::string&, const NamespaceName&, std::string_view) const override {
    return common::Status::ok();
  }
  common::Status check_tenant_admin(const std::string&, const std::string&) const override {
    return common::Status::ok();
  }
  common::Status check_superuser(const std::string&) const override { return common::Status::ok(); }
  common::Status check_any_grant(const std::string&, const NamespaceName&) const override {
    return common::Status::ok();
  }
};

// The one "allow all" every service starts with.
const Authorization& allow_all_authorization();

}  // namespace magnetar::broker
