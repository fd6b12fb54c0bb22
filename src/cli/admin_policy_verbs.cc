#include "cli/admin_policy_verbs.h"

#include <CLI/CLI.hpp>

#include "cli/http_client.h"

namespace magnetar::cli {

using common::Result;
using common::Status;

CLI::App* PolicyVerbs::verb(const std::string& name, const std::string& description, const std::string& method,
                            const std::string& suffix, const std::string& done, BodyMaker make_body,
                            QueryMaker query) {
  auto subject = std::make_shared<std::string>();
  auto* v = add_verb(app, run, options, name, description,
                     [subject, path = path, method, suffix, done, make_body, query]() -> Result<AdminRequest> {
                       auto p = path(*subject, suffix);
                       if (!p.is_ok()) return p.status();
                       std::string body;
                       if (make_body) {
                         auto j = make_body();
                         if (!j.is_ok()) return j.status();
                         body = j->dump();
                       }
                       return AdminRequest{method, *p + (query ? query() : ""), body,
                                           done.empty() ? "" : done + " " + *subject, nullptr};
                     });
  v->add_option(target, *subject, target_help)->required();
  return v;
}

void PolicyVerbs::get_remove(const std::string& name, const std::string& suffix, const std::string& what) {
  auto applied = std::make_shared<bool>(false);
  auto* get = verb("get-" + name, "Show the " + what + " (- when unset)", "GET", suffix, "", nullptr,
                   [applied]() { return *applied ? std::string("?applied=true") : std::string(); });
  if (has_applied) get->add_flag("--applied", *applied, "Show what takes effect, the namespace's policy included");
  verb("remove-" + name, "Remove the " + what + " (the broker default applies)", "DELETE", suffix,
       "Removed the " + what + " of");
}

void PolicyVerbs::int_policy(const std::string& name, const std::string& suffix, const std::string& flag,
                             const std::string& what) {
  auto value = std::make_shared<int64_t>(0);
  auto* set = verb("set-" + name, "Set the " + what, "POST", suffix, "Set the " + what + " of",
                   [value]() -> Result<Json> { return Json(*value); });
  set->add_option(flag, *value, what)->required();
  get_remove(name, suffix, what);
}

void PolicyVerbs::permissions() {
  struct Grant {
    std::string target, role;
    std::vector<std::string> actions;
  };
  auto g = std::make_shared<Grant>();
  auto make_path = path;
  const std::string kind = target;
  auto* grant = add_verb(app, run, options, "grant-permission", "Grant a role actions on a " + kind,
                         [g, make_path]() -> Result<AdminRequest> {
                           auto p = make_path(g->target, "permissions/" + escape_segment(g->role));
                           if (!p.is_ok()) return p.status();
                           return AdminRequest{"POST", *p, Json(g->actions).dump(),
                                               "Granted " + g->role + " on " + g->target, nullptr};
                         });
  grant->add_option(target, g->target, target_help)->required();
  grant->add_option("--role", g->role, "Role")->required();
  grant->add_option("--actions", g->actions, "produce,consume (comma separated)")->required()->delimiter(',');
  auto r = std::make_shared<Grant>();
  auto* revoke = add_verb(app, run, options, "revoke-permission", "Revoke every action of a role on a " + kind,
                          [r, make_path]() -> Result<AdminRequest> {
                            auto p = make_path(r->target, "permissions/" + escape_segment(r->role));
                            if (!p.is_ok()) return p.status();
                            return AdminRequest{"DELETE", *p, "", "Revoked " + r->role + " on " + r->target, nullptr};
                          });
  revoke->add_option(target, r->target, target_help)->required();
  revoke->add_option("--role", r->role, "Role")->required();
  verb("permissions", "Show the roles and their actions", "GET", "permissions", "");
}

namespace {

void add_retention(PolicyVerbs& g) {
  auto time = std::make_shared<std::string>();
  auto size = std::make_shared<std::string>();
  auto* set = g.verb("set-retention", "Set how long and how much acknowledged data is kept", "POST", "retention",
                     "Set the retention of", [time, size]() -> Result<Json> {
                       auto secs = parse_duration_seconds(*time);
                       if (!secs.is_ok()) return secs.status();
                       auto bytes = parse_size_bytes(*size);
                       if (!bytes.is_ok()) return bytes.status();
                       return Json{{"retentionTimeInMinutes", *secs < 0 ? -1 : *secs / 60},
                                   {"retentionSizeInMB", *bytes < 0 ? -1 : *bytes / (1 << 20)}};
                     });
  set->add_option("-t,--time", *time, "Time to keep, e.g. 100m, 3h, 2d, 5w (-1: forever)")->required();
  set->add_option("-s,--size", *size, "Size to keep, e.g. 10M, 16G, 3T (-1: no limit)")->required();
  g.get_remove("retention", "retention", "retention");
}

void add_message_ttl(PolicyVerbs& g) {
  auto ttl = std::make_shared<std::string>();
  g.verb("set-message-ttl", "Expire unacknowledged messages after a time", "POST", "messageTTL",
         "Set the message TTL of", [ttl]() -> Result<Json> {
           auto secs = parse_duration_seconds(*ttl);
           if (!secs.is_ok()) return secs.status();
           return Json(*secs);
         })->add_option("-t,--ttl", *ttl, "Time to live, e.g. 3600, 60m, 1d")->required();
  g.get_remove("message-ttl", "messageTTL", "message TTL");
}

void add_backlog_quota(PolicyVerbs& g) {
  struct Quota {
    std::string limit = "-1", limit_time = "-1", policy = "producer_request_hold", type = "destination_storage";
  };
  auto q = std::make_shared<Quota>();
  auto* set = g.verb(
      "set-backlog-quota", "Limit the backlog by size or age", "POST", "backlogQuota", "Set the backlog quota of",
      [q]() -> Result<Json> {
        auto bytes = parse_size_bytes(q->limit);
        if (!bytes.is_ok()) return bytes.status();
        auto secs = parse_duration_seconds(q->limit_time);
        if (!secs.is_ok()) return secs.status();
        return Json{{"limitSize", *bytes}, {"limitTime", *secs}, {"policy", q->policy}};
      },
      [q]() { return "?backlogQuotaType=" + escape_segment(q->type); });
  set->add_option("-l,--limit", q->limit, "Size limit, e.g. 10G (-1: none)")->capture_default_str();
  set->add_option("--limit-time", q->limit_time, "Age limit, e.g. 3h (-1: none)")->capture_default_str();
  set->add_option("-p,--policy", q->policy, "producer_request_hold, producer_exception or consumer_backlog_eviction")
      ->capture_default_str()
      ->transform(CLI::IsMember({"producer_request_hold", "producer_exception", "consumer_backlog_eviction"},
                                CLI::ignore_case));
  set->add_option("--type", q->type, "destination_storage (size) or message_age (time)")
      ->capture_default_str()
      ->transform(CLI::IsMember({"destination_storage", "message_age"}, CLI::ignore_case));

  auto applied = std::make_shared<bool>(false);
  auto* get = g.verb("get-backlog-quotas", "Show the backlog quotas", "GET", "backlogQuotaMap", "", nullptr,
                     [applied]() { return *applied ? std::string("?applied=true") : std::string(); });
  if (g.has_applied) get->add_flag("--applied", *applied, "Show what takes effect, the namespace's quotas included");

  auto type = std::make_shared<std::string>("destination_storage");
  g.verb("remove-backlog-quota", "Remove a backlog quota", "DELETE", "backlogQuota", "Removed the backlog quota of",
         nullptr, [type]() { return "?backlogQuotaType=" + escape_segment(*type); })
      ->add_option("--type", *type, "destination_storage or message_age")
      ->capture_default_str()
      ->transform(CLI::IsMember({"destination_storage", "message_age"}, CLI::ignore_case));
}

void add_persistence(PolicyVerbs& g) {
  struct Persistence {
    int32_t ensemble = 1, write_quorum = 1, ack_quorum = 1, fsync_interval_ms = 0;
    double mark_delete_rate = 0;
    std::string fsync_mode;  // empty: the node's --fsync
  };
  auto p = std::make_shared<Persistence>();
  auto* set = g.verb("set-persistence", "Set replication and durability of new data", "POST", "persistence",
                     "Set the persistence of", [p]() -> Result<Json> {
                       Json body{{"bookkeeperEnsemble", p->ensemble},
                                 {"bookkeeperWriteQuorum", p->write_quorum},
                                 {"bookkeeperAckQuorum", p->ack_quorum},
                                 {"managedLedgerMaxMarkDeleteRate", p->mark_delete_rate},
                                 {"fsyncIntervalMs", p->fsync_interval_ms}};
                       if (!p->fsync_mode.empty()) body["fsyncMode"] = p->fsync_mode;
                       return body;
                     });
  set->add_option("-e,--bookkeeper-ensemble", p->ensemble, "Nodes a ledger is striped over")->capture_default_str();
  set->add_option("-w,--bookkeeper-write-quorum", p->write_quorum, "Copies of each entry")->capture_default_str();
  set->add_option("-a,--bookkeeper-ack-quorum", p->ack_quorum, "Copies stored before a write is acknowledged")
      ->capture_default_str();
  set->add_option("-r,--ml-mark-delete-max-rate", p->mark_delete_rate,
                  "Cursor position writes per second (0: unlimited)")->capture_default_str();
  set->add_option("--fsync-mode", p->fsync_mode, "always, interval or never (default: the node's --fsync)")
      ->transform(CLI::IsMember({"always", "interval", "never"}, CLI::ignore_case));
  set->add_option("--fsync-interval-ms", p->fsync_interval_ms, "For --fsync-mode interval")->capture_default_str();
  g.get_remove("persistence", "persistence", "persistence policy");
}

void add_deduplication(PolicyVerbs& g, const std::string& suffix) {
  auto enable = std::make_shared<bool>(false);
  auto disable = std::make_shared<bool>(false);
  auto* set = g.verb("set-deduplication", "Turn message deduplication on or off", "POST", suffix,
                     "Set deduplication of", [enable, disable]() -> Result<Json> {
                       if (*enable == *disable) return Status::invalid_argument("give one of --enable or --disable");
                       return Json(*enable);
                     });
  set->add_flag("-e,--enable", *enable, "Deduplicate");
  set->add_flag("-d,--disable", *disable, "Do not deduplicate");
  g.get_remove("deduplication", suffix, "deduplication setting");
}

void add_dispatch_rate(PolicyVerbs& g, const std::string& name, const std::string& suffix, const std::string& what) {
  struct Rate {
    int64_t msgs = -1, bytes = -1;
    int32_t period = 1;
    bool relative = false;
  };
  auto r = std::make_shared<Rate>();
  auto* set = g.verb("set-" + name, "Set the " + what, "POST", suffix, "Set the " + what + " of", [r]() -> Result<Json> {
    return Json{{"dispatchThrottlingRateInMsg", r->msgs},
                {"dispatchThrottlingRateInByte", r->bytes},
                {"ratePeriodInSecond", r->period},
                {"relativeToPublishRate", r->relative}};
  });
  set->add_option("--msg-dispatch-rate", r->msgs, "Messages per period (-1: unlimited)")->capture_default_str();
  set->add_option("--byte-dispatch-rate", r->bytes, "Bytes per period (-1: unlimited)")->capture_default_str();
  set->add_option("--dispatch-rate-period", r->period, "Period in seconds")->capture_default_str();
  set->add_flag("--relative-to-publish-rate", r->relative, "The rate is relative to the publish rate");
  g.get_remove(name, suffix, what);
}

void add_publish_rate(PolicyVerbs& g) {
  auto msgs = std::make_shared<int64_t>(-1);
  auto bytes = std::make_shared<int64_t>(-1);
  auto* set = g.verb("set-publish-rate", "Limit the publish rate per topic", "POST", "publishRate",
                     "Set the publish rate of", [msgs, bytes]() -> Result<Json> {
                       return Json{{"publishThrottlingRateInMsg", *msgs}, {"publishThrottlingRateInByte", *bytes}};
                     });
  set->add_option("-m,--msg-publish-rate", *msgs, "Messages per second (-1: unlimited)")->capture_default_str();
  set->add_option("-b,--byte-publish-rate", *bytes, "Bytes per second (-1: unlimited)")->capture_default_str();
  g.get_remove("publish-rate", "publishRate", "publish rate");
}

}  // namespace

void add_shared_policy_verbs(PolicyVerbs& g, const SharedPolicyNames& n) {
  add_retention(g);
  add_message_ttl(g);
  add_backlog_quota(g);
  add_persistence(g);
  add_deduplication(g, n.deduplication_suffix);
  add_publish_rate(g);
  add_dispatch_rate(g, "dispatch-rate", "dispatchRate", "dispatch rate per topic");
  add_dispatch_rate(g, "subscription-dispatch-rate", "subscriptionDispatchRate", "dispatch rate per subscription");
  g.int_policy(n.max_producers, n.max_producers_suffix, n.max_producers_flag, "maximum producers per topic");
  g.int_policy(n.max_consumers, n.max_consumers_suffix, n.max_consumers_flag, "maximum consumers per topic");
  g.int_policy("max-consumers-per-subscription", "maxConsumersPerSubscription", "-c,--max-consumers-per-subscription",
               "maximum consumers per subscription");
  g.int_policy("max-subscriptions-per-topic", "maxSubscriptionsPerTopic", "-m,--max-subscriptions-per-topic",
               "maximum subscriptions per topic");
  g.int_policy("compaction-threshold", "compactionThreshold", "-t,--threshold",
               "compaction threshold (bytes after the compaction horizon that start a pass; 0: off)");
}

}  // namespace magnetar::cli
