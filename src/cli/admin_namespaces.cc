// `magnetar admin namespaces ...`: namespaces and every namespace policy,
// with pulsar-admin's verb names (set-X / get-X / remove-X).
#include "cli/admin_cli.h"
#include "cli/http_client.h"

namespace magnetar::cli {

using common::Result;
using common::Status;

namespace {

using BodyMaker = std::function<Result<Json>()>;

struct Group {
  CLI::App& app;
  Command& run;
  std::shared_ptr<AdminOptions> options;

  // A verb on one namespace: `method` on namespaces/{ns}/{suffix} with the
  // body `make_body` builds (none when null).
  CLI::App* verb(const std::string& name, const std::string& description, const std::string& method,
                 const std::string& suffix, const std::string& done, BodyMaker make_body = nullptr) {
    auto ns = std::make_shared<std::string>();
    auto* v = add_verb(app, run, options, name, description,
                       [ns, method, suffix, done, make_body]() -> Result<AdminRequest> {
                         auto path = namespace_path(*ns, suffix);
                         if (!path.is_ok()) return path.status();
                         std::string body;
                         if (make_body) {
                           auto j = make_body();
                           if (!j.is_ok()) return j.status();
                           body = j->dump();
                         }
                         return AdminRequest{method, *path, body, done.empty() ? "" : done + " " + *ns, nullptr};
                       });
    v->add_option("namespace", *ns, "tenant/namespace")->required();
    return v;
  }

  // get-<name> and remove-<name> for the policy at `suffix`.
  void get_remove(const std::string& name, const std::string& suffix, const std::string& what) {
    verb("get-" + name, "Show the " + what + " (- when unset)", "GET", suffix, "");
    verb("remove-" + name, "Remove the " + what + " (the broker default applies)", "DELETE", suffix,
         "Removed the " + what + " of");
  }

  // set/get/remove for a policy that is one integer.
  void int_policy(const std::string& name, const std::string& suffix, const std::string& flag,
                  const std::string& what) {
    auto value = std::make_shared<int64_t>(0);
    auto* set = verb("set-" + name, "Set the " + what, "POST", suffix, "Set the " + what + " of",
                     [value]() -> Result<Json> { return Json(*value); });
    set->add_option(flag, *value, what)->required();
    get_remove(name, suffix, what);
  }
};

BodyMaker dispatch_body(std::shared_ptr<int64_t> msgs, std::shared_ptr<int64_t> bytes, std::shared_ptr<int32_t> period,
                        std::shared_ptr<bool> relative) {
  return [=]() -> Result<Json> {
    return Json{{"dispatchThrottlingRateInMsg", *msgs},
                {"dispatchThrottlingRateInByte", *bytes},
                {"ratePeriodInSecond", *period},
                {"relativeToPublishRate", *relative}};
  };
}

void add_dispatch_rate(Group& g, const std::string& name, const std::string& suffix, const std::string& what) {
  auto msgs = std::make_shared<int64_t>(-1);
  auto bytes = std::make_shared<int64_t>(-1);
  auto period = std::make_shared<int32_t>(1);
  auto relative = std::make_shared<bool>(false);
  auto* set = g.verb("set-" + name, "Set the " + what, "POST", suffix, "Set the " + what + " of",
                     dispatch_body(msgs, bytes, period, relative));
  set->add_option("--msg-dispatch-rate", *msgs, "Messages per period (-1: unlimited)")->capture_default_str();
  set->add_option("--byte-dispatch-rate", *bytes, "Bytes per period (-1: unlimited)")->capture_default_str();
  set->add_option("--dispatch-rate-period", *period, "Period in seconds")->capture_default_str();
  set->add_flag("--relative-to-publish-rate", *relative, "The rate is relative to the publish rate");
  g.get_remove(name, suffix, what);
}

}  // namespace

void add_namespace_commands(CLI::App& admin, Command& run, std::shared_ptr<AdminOptions> options) {
  auto* app = admin.add_subcommand("namespaces", "Namespaces and their policies");
  app->require_subcommand(1);
  app->fallthrough();
  Group g{*app, run, options};

  auto tenant = std::make_shared<std::string>();
  add_verb(*app, run, options, "list", "List the namespaces of a tenant", [tenant]() -> Result<AdminRequest> {
    return AdminRequest{"GET", "/admin/v2/namespaces/" + escape_segment(*tenant), "", "", nullptr};
  })->add_option("tenant", *tenant, "Tenant name")->required();

  auto clusters = std::make_shared<std::vector<std::string>>();
  g.verb("create", "Create a namespace", "PUT", "", "Created namespace", [clusters]() -> Result<Json> {
     if (clusters->empty()) return Json(nullptr);
     return Json{{"replication_clusters", *clusters}};
   })->add_option("-c,--clusters", *clusters, "Replication clusters (comma separated; default: this cluster)")
      ->delimiter(',');
  g.verb("delete", "Delete a namespace that has no topics", "DELETE", "", "Deleted namespace");
  g.verb("policies", "Show every policy of a namespace", "GET", "", "");
  g.verb("topics", "List the topics of a namespace", "GET", "topics", "");

  // Retention.
  auto time = std::make_shared<std::string>();
  auto size = std::make_shared<std::string>();
  auto* retention = g.verb("set-retention", "Set how long and how much acknowledged data is kept", "POST", "retention",
                           "Set the retention of", [time, size]() -> Result<Json> {
                             auto secs = parse_duration_seconds(*time);
                             if (!secs.is_ok()) return secs.status();
                             auto bytes = parse_size_bytes(*size);
                             if (!bytes.is_ok()) return bytes.status();
                             return Json{{"retentionTimeInMinutes", *secs < 0 ? -1 : *secs / 60},
                                         {"retentionSizeInMB", *bytes < 0 ? -1 : *bytes / (1 << 20)}};
                           });
  retention->add_option("-t,--time", *time, "Time to keep, e.g. 100m, 3h, 2d, 5w (-1: forever)")->required();
  retention->add_option("-s,--size", *size, "Size to keep, e.g. 10M, 16G, 3T (-1: no limit)")->required();
  g.get_remove("retention", "retention", "retention");

  // Message TTL.
  auto ttl = std::make_shared<std::string>();
  g.verb("set-message-ttl", "Expire unacknowledged messages after a time", "POST", "messageTTL",
         "Set the message TTL of", [ttl]() -> Result<Json> {
           auto secs = parse_duration_seconds(*ttl);
           if (!secs.is_ok()) return secs.status();
           return Json(*secs);
         })->add_option("-t,--ttl", *ttl, "Time to live, e.g. 3600, 60m, 1d")->required();
  g.get_remove("message-ttl", "messageTTL", "message TTL");

  // Backlog quota.
  struct Quota {
    std::string limit = "-1", limit_time = "-1", policy = "producer_request_hold", type = "destination_storage";
  };
  auto quota = std::make_shared<Quota>();
  {
    auto ns = std::make_shared<std::string>();
    auto* v = add_verb(*app, run, options, "set-backlog-quota", "Limit the backlog by size or age",
                       [quota, ns]() -> Result<AdminRequest> {
                         auto path = namespace_path(*ns, "backlogQuota");
                         if (!path.is_ok()) return path.status();
                         auto bytes = parse_size_bytes(quota->limit);
                         if (!bytes.is_ok()) return bytes.status();
                         auto secs = parse_duration_seconds(quota->limit_time);
                         if (!secs.is_ok()) return secs.status();
                         Json body{{"limitSize", *bytes}, {"limitTime", *secs}, {"policy", quota->policy}};
                         return AdminRequest{"POST", *path + "?backlogQuotaType=" + escape_segment(quota->type),
                                             body.dump(), "Set the backlog quota of " + *ns, nullptr};
                       });
    v->add_option("namespace", *ns, "tenant/namespace")->required();
    v->add_option("-l,--limit", quota->limit, "Size limit, e.g. 10G (-1: none)")->capture_default_str();
    v->add_option("--limit-time", quota->limit_time, "Age limit, e.g. 3h (-1: none)")->capture_default_str();
    v->add_option("-p,--policy", quota->policy,
                  "producer_request_hold, producer_exception or consumer_backlog_eviction")
        ->capture_default_str();
    v->add_option("--type", quota->type, "destination_storage (size) or message_age (time)")->capture_default_str();
  }
  g.verb("get-backlog-quotas", "Show the backlog quotas", "GET", "backlogQuotaMap", "");
  {
    auto ns = std::make_shared<std::string>();
    auto type = std::make_shared<std::string>("destination_storage");
    auto* v = add_verb(*app, run, options, "remove-backlog-quota", "Remove a backlog quota",
                       [ns, type]() -> Result<AdminRequest> {
                         auto path = namespace_path(*ns, "backlogQuota");
                         if (!path.is_ok()) return path.status();
                         return AdminRequest{"DELETE", *path + "?backlogQuotaType=" + escape_segment(*type), "",
                                             "Removed the backlog quota of " + *ns, nullptr};
                       });
    v->add_option("namespace", *ns, "tenant/namespace")->required();
    v->add_option("--type", *type, "destination_storage or message_age")->capture_default_str();
  }

  // Persistence.
  struct Persistence {
    int32_t ensemble = 1, write_quorum = 1, ack_quorum = 1, fsync_interval_ms = 0;
    double mark_delete_rate = 0;
    std::string fsync_mode = "every-commit";
  };
  auto persistence = std::make_shared<Persistence>();
  auto* set_persistence = g.verb("set-persistence", "Set replication and durability of new data", "POST", "persistence",
                                 "Set the persistence of", [persistence]() -> Result<Json> {
                                   const auto& p = *persistence;
                                   return Json{{"bookkeeperEnsemble", p.ensemble},
                                               {"bookkeeperWriteQuorum", p.write_quorum},
                                               {"bookkeeperAckQuorum", p.ack_quorum},
                                               {"managedLedgerMaxMarkDeleteRate", p.mark_delete_rate},
                                               {"fsyncMode", p.fsync_mode},
                                               {"fsyncIntervalMs", p.fsync_interval_ms}};
                                 });
  set_persistence->add_option("-e,--bookkeeper-ensemble", persistence->ensemble, "Nodes a ledger is striped over")
      ->capture_default_str();
  set_persistence->add_option("-w,--bookkeeper-write-quorum", persistence->write_quorum, "Copies of each entry")
      ->capture_default_str();
  set_persistence->add_option("-a,--bookkeeper-ack-quorum", persistence->ack_quorum,
                              "Copies stored before a write is acknowledged")->capture_default_str();
  set_persistence->add_option("-r,--ml-mark-delete-max-rate", persistence->mark_delete_rate,
                              "Cursor position writes per second (0: unlimited)")->capture_default_str();
  set_persistence->add_option("--fsync-mode", persistence->fsync_mode, "every-commit, interval or never")
      ->capture_default_str();
  set_persistence->add_option("--fsync-interval-ms", persistence->fsync_interval_ms, "For --fsync-mode interval")
      ->capture_default_str();
  g.get_remove("persistence", "persistence", "persistence policy");

  // Deduplication.
  auto enable = std::make_shared<bool>(false);
  auto disable = std::make_shared<bool>(false);
  auto* dedup = g.verb("set-deduplication", "Turn message deduplication on or off", "POST", "deduplication",
                       "Set deduplication of", [enable, disable]() -> Result<Json> {
                         if (*enable == *disable) return Status::invalid_argument("give one of --enable or --disable");
                         return Json(*enable);
                       });
  dedup->add_flag("-e,--enable", *enable, "Deduplicate");
  dedup->add_flag("-d,--disable", *disable, "Do not deduplicate");
  g.get_remove("deduplication", "deduplication", "deduplication setting");

  // Permissions.
  {
    auto ns = std::make_shared<std::string>();
    auto role = std::make_shared<std::string>();
    auto actions = std::make_shared<std::vector<std::string>>();
    auto* grant = add_verb(*app, run, options, "grant-permission", "Grant a role actions on a namespace",
                           [ns, role, actions]() -> Result<AdminRequest> {
                             auto path = namespace_path(*ns, "permissions/" + escape_segment(*role));
                             if (!path.is_ok()) return path.status();
                             return AdminRequest{"POST", *path, Json(*actions).dump(),
                                                 "Granted " + *role + " on " + *ns, nullptr};
                           });
    grant->add_option("namespace", *ns, "tenant/namespace")->required();
    grant->add_option("--role", *role, "Role")->required();
    grant->add_option("--actions", *actions, "produce,consume (comma separated)")->required()->delimiter(',');
    auto rns = std::make_shared<std::string>();
    auto rrole = std::make_shared<std::string>();
    auto* revoke = add_verb(*app, run, options, "revoke-permission", "Revoke every action of a role",
                            [rns, rrole]() -> Result<AdminRequest> {
                              auto path = namespace_path(*rns, "permissions/" + escape_segment(*rrole));
                              if (!path.is_ok()) return path.status();
                              return AdminRequest{"DELETE", *path, "", "Revoked " + *rrole + " on " + *rns, nullptr};
                            });
    revoke->add_option("namespace", *rns, "tenant/namespace")->required();
    revoke->add_option("--role", *rrole, "Role")->required();
    g.verb("permissions", "Show the roles and their actions", "GET", "permissions", "");
  }

  // Rates.
  auto pub_msgs = std::make_shared<int64_t>(-1);
  auto pub_bytes = std::make_shared<int64_t>(-1);
  auto* publish = g.verb("set-publish-rate", "Limit the publish rate per topic", "POST", "publishRate",
                         "Set the publish rate of", [pub_msgs, pub_bytes]() -> Result<Json> {
                           return Json{{"publishThrottlingRateInMsg", *pub_msgs},
                                       {"publishThrottlingRateInByte", *pub_bytes}};
                         });
  publish->add_option("-m,--msg-publish-rate", *pub_msgs, "Messages per second (-1: unlimited)")->capture_default_str();
  publish->add_option("-b,--byte-publish-rate", *pub_bytes, "Bytes per second (-1: unlimited)")->capture_default_str();
  g.get_remove("publish-rate", "publishRate", "publish rate");
  add_dispatch_rate(g, "dispatch-rate", "dispatchRate", "dispatch rate per topic");
  add_dispatch_rate(g, "subscription-dispatch-rate", "subscriptionDispatchRate", "dispatch rate per subscription");

  // Limits.
  g.int_policy("max-producers-per-topic", "maxProducersPerTopic", "-p,--max-producers-per-topic",
               "maximum producers per topic");
  g.int_policy("max-consumers-per-topic", "maxConsumersPerTopic", "-c,--max-consumers-per-topic",
               "maximum consumers per topic");
  g.int_policy("max-consumers-per-subscription", "maxConsumersPerSubscription", "-c,--max-consumers-per-subscription",
               "maximum consumers per subscription");
  g.int_policy("max-subscriptions-per-topic", "maxSubscriptionsPerTopic", "-m,--max-subscriptions-per-topic",
               "maximum subscriptions per topic");
  g.int_policy("max-topics-per-namespace", "maxTopicsPerNamespace", "-t,--max-topics-per-namespace",
               "maximum topics in the namespace");
  g.int_policy("subscription-expiration-time", "subscriptionExpirationTime", "-t,--time",
               "minutes after which an inactive subscription is removed");

  // Auto topic creation.
  struct AutoCreate {
    bool enable = false, disable = false;
    std::string type = "non-partitioned";
    int32_t partitions = 0;
  };
  auto ac = std::make_shared<AutoCreate>();
  auto* auto_create = g.verb("set-auto-topic-creation", "Allow or forbid creating topics on first use", "POST",
                             "autoTopicCreation", "Set auto topic creation of", [ac]() -> Result<Json> {
                               if (ac->enable == ac->disable) {
                                 return Status::invalid_argument("give one of --enable or --disable");
                               }
                               Json j{{"allowAutoTopicCreation", ac->enable}, {"topicType", ac->type}};
                               if (ac->type == "partitioned") j["defaultNumPartitions"] = ac->partitions;
                               return j;
                             });
  auto_create->add_flag("-e,--enable", ac->enable, "Allow");
  auto_create->add_flag("-d,--disable", ac->disable, "Forbid");
  auto_create->add_option("--type", ac->type, "partitioned or non-partitioned")->capture_default_str();
  auto_create->add_option("-n,--num-partitions", ac->partitions, "Partitions of auto-created partitioned topics");
  g.get_remove("auto-topic-creation", "autoTopicCreation", "auto topic creation override");

  // Replication clusters.
  auto repl = std::make_shared<std::vector<std::string>>();
  g.verb("set-clusters", "Set the clusters the namespace replicates to", "POST", "replication",
         "Set the replication clusters of", [repl]() -> Result<Json> { return Json(*repl); })
      ->add_option("-c,--clusters", *repl, "Clusters (comma separated)")->required()->delimiter(',');
  g.verb("get-clusters", "Show the clusters the namespace replicates to", "GET", "replication", "");
}

}  // namespace magnetar::cli
