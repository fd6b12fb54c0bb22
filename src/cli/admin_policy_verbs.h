// Policy verbs shared by `admin namespaces` and `admin topics`: the same
// set-X / get-X / remove-X verbs on a namespace or on one topic's overrides.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cli/admin_cli.h"

namespace magnetar::cli {

using BodyMaker = std::function<common::Result<Json>()>;
// The query string for a request ("?a=b"), or "".
using QueryMaker = std::function<std::string()>;

// Verbs on one kind of target: each verb takes the target as its first
// positional argument and sends `method` to path(target, suffix).
struct PolicyVerbs {
  CLI::App& app;
  Command& run;
  std::shared_ptr<AdminOptions> options;
  std::string target;       // positional name: "namespace" or "topic"
  std::string target_help;  // "tenant/namespace", ...
  std::function<common::Result<std::string>(const std::string& target, const std::string& suffix)> path;
  bool has_applied = false;  // get- verbs take --applied (topic overrides)

  CLI::App* verb(const std::string& name, const std::string& description, const std::string& method,
                 const std::string& suffix, const std::string& done, BodyMaker make_body = nullptr,
                 QueryMaker query = nullptr);
  // get-<name> and remove-<name> for the policy at `suffix`.
  void get_remove(const std::string& name, const std::string& suffix, const std::string& what);
  // set/get/remove for a policy that is one integer given by `flag`.
  void int_policy(const std::string& name, const std::string& suffix, const std::string& flag,
                  const std::string& what);
  // grant-permission (--role R --actions produce,consume), revoke-permission
  // (--role R) and permissions.
  void permissions();
};

// Names that differ between namespaces and topics (Pulsar's own split).
struct SharedPolicyNames {
  std::string deduplication_suffix;  // "deduplication" / "deduplicationEnabled"
  std::string max_producers;         // verb stem: "max-producers-per-topic" / "max-producers"
  std::string max_producers_suffix;  // "maxProducersPerTopic" / "maxProducers"
  std::string max_producers_flag;    // "-p,--max-producers-per-topic" / "-p,--max-producers"
  std::string max_consumers;
  std::string max_consumers_suffix;
  std::string max_consumers_flag;
};

// retention, message-ttl, backlog-quota(s), persistence, deduplication,
// publish-rate, dispatch-rate, subscription-dispatch-rate, max producers /
// consumers / consumers-per-subscription / subscriptions-per-topic.
void add_shared_policy_verbs(PolicyVerbs& g, const SharedPolicyNames& names);

}  // namespace magnetar::cli
