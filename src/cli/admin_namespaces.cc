// `magnetar admin namespaces ...`: namespaces and every namespace policy,
// with pulsar-admin's verb names (set-X / get-X / remove-X).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/admin_cli.h"
#include "cli/admin_policy_verbs.h"
#include "cli/http_client.h"

namespace magnetar::cli {

using common::Result;
using common::Status;

void add_namespace_commands(CLI::App& admin, Command& run, std::shared_ptr<AdminOptions> options) {
  auto* app = admin.add_subcommand("namespaces", "Namespaces and their policies");
  app->require_subcommand(1);
  app->fallthrough();
  PolicyVerbs g{*app, run, options, "namespace", "tenant/namespace",
                [](const std::string& ns, const std::string& suffix) { return namespace_path(ns, suffix); }};

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

  // Bundles: which broker serves each, and moving them (pulsar-admin's unload).
  {
    auto ns = std::make_shared<std::string>();
    add_verb(*app, run, options, "bundles", "Show a namespace's bundles and the broker serving each",
             [ns]() -> Result<AdminRequest> {
               auto path = namespace_path(*ns, "bundle-owners");
               if (!path.is_ok()) return path.status();
               AdminRequest req{"GET", *path, "", "", nullptr};
               req.print = [](const Json& owners) {
                 fmt::print("{:<24} {:>20} {:<6} {:>7} {:>10} {}\n", "BUNDLE", "OWNER", "ALIVE", "TOPICS", "MSG/S",
                            "BROKER");
                 for (const auto& b : owners) {
                   const uint64_t owner = b.value("owner", uint64_t{0});
                   std::string broker = b["brokerUrl"].is_string() ? b["brokerUrl"].get<std::string>() : "-";
                   if (b.value("releasing", false)) broker += " (moving)";
                   const Json load = b.contains("load") && b["load"].is_object() ? b["load"] : Json::object();
                   fmt::print("{:<24} {:>20} {:<6} {:>7} {:>10.1f} {}\n", b.value("bundle", ""),
                              owner == 0 ? std::string("-") : std::to_string(owner),
                              owner == 0 ? "-" : b.value("alive", false) ? "yes" : "no",
                              load.value("topics", int64_t{0}), load.value("msgRate", 0.0), broker);
                 }
               };
               return req;
             })
        ->add_option("namespace", *ns, "tenant/namespace")
        ->required();
    struct UnloadFlags {
      std::string ns, bundle, destination;
    };
    auto u = std::make_shared<UnloadFlags>();
    auto* unload = add_verb(
        *app, run, options, "unload",
        "Move a namespace's bundles (or one) off their brokers: topics close there and clients look them up again",
        [u]() -> Result<AdminRequest> {
          auto path = namespace_path(u->ns, u->bundle.empty() ? "unload" : escape_segment(u->bundle) + "/unload");
          if (!path.is_ok()) return path.status();
          if (!u->destination.empty()) *path += "?destinationBroker=" + escape_segment(u->destination);
          return AdminRequest{"PUT", *path, "",
                              "Unloaded " + (u->bundle.empty() ? "namespace " + u->ns : "bundle " + u->bundle), nullptr};
        });
    unload->add_option("namespace", u->ns, "tenant/namespace")->required();
    unload->add_option("-b,--bundle", u->bundle, "One bundle, as `bundles` shows it (default: every bundle)");
    unload->add_option("-d,--destination", u->destination,
                       "The broker to move to: its node id or host:port (default: the least loaded)");
    struct SplitFlags {
      std::string ns, bundle, algorithm;
      std::vector<uint32_t> boundaries;
      bool unload = false;
    };
    auto sp = std::make_shared<SplitFlags>();
    auto* split = add_verb(
        *app, run, options, "split-bundle",
        "Cut a bundle in two (or at given hashes); its broker keeps the pieces, its topics staying loaded",
        [sp]() -> Result<AdminRequest> {
          auto path = namespace_path(sp->ns, escape_segment(sp->bundle) + "/split");
          if (!path.is_ok()) return path.status();
          std::string algorithm = sp->algorithm;
          if (algorithm.empty()) {
            algorithm = sp->boundaries.empty() ? "range_equally_divide" : "specified_positions_divide";
          }
          *path += "?splitAlgorithmName=" + escape_segment(algorithm) + (sp->unload ? "&unload=true" : "");
          std::string body = sp->boundaries.empty() ? "" : Json(sp->boundaries).dump();
          return AdminRequest{"PUT", *path, body, "Split bundle " + sp->bundle + " of " + sp->ns, nullptr};
        });
    split->add_option("namespace", sp->ns, "tenant/namespace")->required();
    split->add_option("-b,--bundle", sp->bundle, "The bundle, as `bundles` shows it")->required();
    split->add_flag("-u,--unload", sp->unload, "Unload the pieces afterwards, so that lookups spread them");
    split->add_option("--split-algorithm-name", sp->algorithm,
                      "range_equally_divide (halves), topic_count_equally_divide (half the topics each side) or "
                      "specified_positions_divide (at --split-boundaries)");
    split->add_option("--split-boundaries", sp->boundaries, "Hashes to cut at (comma separated)")->delimiter(',');
  }

  add_shared_policy_verbs(g, {"deduplication", "max-producers-per-topic", "maxProducersPerTopic",
                              "-p,--max-producers-per-topic", "max-consumers-per-topic", "maxConsumersPerTopic",
                              "-c,--max-consumers-per-topic"});

  // Permissions.
  g.permissions();

  // Subscription permissions, as pulsar-admin names them.
  {
    struct SubscriptionGrant {
      std::string ns, subscription, role;
      std::vector<std::string> roles;
    };
    auto a = std::make_shared<SubscriptionGrant>();
    auto* grant = add_verb(*app, run, options, "grant-subscription-permission",
                           "Let only these roles consume through a subscription", [a]() -> Result<AdminRequest> {
                             auto path = namespace_path(a->ns, "permissions/subscription/" +
                                                                   escape_segment(a->subscription));
                             if (!path.is_ok()) return path.status();
                             return AdminRequest{"POST", *path, Json(a->roles).dump(),
                                                 "Granted subscription " + a->subscription + " on " + a->ns, nullptr};
                           });
    grant->add_option("namespace", a->ns, "tenant/namespace")->required();
    grant->add_option("--subscription", a->subscription, "Subscription")->required();
    grant->add_option("--roles", a->roles, "role,role (comma separated)")->required()->delimiter(',');
    auto r = std::make_shared<SubscriptionGrant>();
    auto* revoke = add_verb(*app, run, options, "revoke-subscription-permission",
                            "Take a role off a subscription", [r]() -> Result<AdminRequest> {
                              auto path = namespace_path(r->ns, "permissions/" + escape_segment(r->subscription) +
                                                                    "/" + escape_segment(r->role));
                              if (!path.is_ok()) return path.status();
                              return AdminRequest{"DELETE", *path, "",
                                                  "Revoked " + r->role + " on subscription " + r->subscription, nullptr};
                            });
    revoke->add_option("namespace", r->ns, "tenant/namespace")->required();
    revoke->add_option("--subscription", r->subscription, "Subscription")->required();
    revoke->add_option("--role", r->role, "Role")->required();
    g.verb("subscription-permissions", "Show each subscription's roles", "GET", "permissions/subscription", "");
    auto mode = std::make_shared<std::string>();
    auto* set_mode = g.verb("set-subscription-auth-mode", "Require subscription names to start with the role",
                            "POST", "subscriptionAuthMode", "Set subscription auth mode",
                            [mode]() -> Result<Json> { return Json(*mode); });
    set_mode->add_option("-m,--subscription-auth-mode", *mode, "None or Prefix")
        ->required()
        ->transform(CLI::IsMember({"None", "Prefix"}, CLI::ignore_case));
    g.get_remove("subscription-auth-mode", "subscriptionAuthMode", "subscription auth mode");
  }

  // Namespace-wide limits.
  g.int_policy("max-topics-per-namespace", "maxTopicsPerNamespace", "-t,--max-topics-per-namespace",
               "maximum topics in the namespace");
  g.int_policy("subscription-expiration-time", "subscriptionExpirationTime", "-t,--time",
               "minutes after which an inactive subscription is removed");
  g.int_policy("max-unacked-messages-per-consumer", "maxUnackedMessagesPerConsumer",
               "-c,--max-unacked-messages-per-consumer", "unacknowledged messages a Shared consumer may hold");
  g.int_policy("max-unacked-messages-per-subscription", "maxUnackedMessagesPerSubscription",
               "-m,--max-unacked-messages-per-subscription", "unacknowledged messages a Shared subscription may hold");

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

  // Bookie affinity group (a cluster): the storage groups that keep the namespace's ledgers.
  struct Affinity {
    std::string primary, secondary;
  };
  auto af = std::make_shared<Affinity>();
  auto* affinity = g.verb("set-bookie-affinity-group",
                          "Keep the copies of the namespace's new ledgers on the nodes of these storage groups "
                          "(--storage-group), the secondary only when the primary have too few",
                          "POST", "persistence/bookieAffinity", "Set the bookie affinity group of",
                          [af]() -> Result<Json> {
                            Json j{{"bookkeeperAffinityGroupPrimary", af->primary}};
                            if (!af->secondary.empty()) j["bookkeeperAffinityGroupSecondary"] = af->secondary;
                            return j;
                          });
  affinity->add_option("--primary-group", af->primary, "Storage groups, comma-separated")->required();
  affinity->add_option("--secondary-group", af->secondary, "Storage groups used when the primary have too few nodes");
  g.get_remove("bookie-affinity-group", "persistence/bookieAffinity", "bookie affinity group");

  // Message tracing.
  struct Tracing {
    std::string mode, time = "7d", size = "1G";
    double rate = 1.0;
  };
  auto tr = std::make_shared<Tracing>();
  auto* tracing = g.verb("set-tracing", "Record where each message goes (magnetar trace looks it up)", "POST",
                         "tracing", "Set the tracing of", [tr]() -> Result<Json> {
                           auto secs = parse_duration_seconds(tr->time);
                           if (!secs.is_ok()) return secs.status();
                           auto bytes = parse_size_bytes(tr->size);
                           if (!bytes.is_ok()) return bytes.status();
                           return Json{{"mode", tr->mode},
                                       {"rate", tr->rate},
                                       {"retentionTimeInMinutes", *secs < 0 ? -1 : *secs / 60},
                                       {"retentionSizeInMB", *bytes < 0 ? -1 : *bytes / (1 << 20)}};
                         });
  tracing->add_option("--mode", tr->mode, "off, sampled or all")->required();
  tracing->add_option("--rate", tr->rate, "With --mode sampled: the fraction of messages traced, e.g. 0.01")
      ->capture_default_str();
  tracing->add_option("--retention-time", tr->time, "How long traces are kept, e.g. 1d (-1: forever)")
      ->capture_default_str();
  tracing->add_option("--retention-size", tr->size, "How much of them is kept, e.g. 512M (-1: no limit)")
      ->capture_default_str();
  g.get_remove("tracing", "tracing", "tracing policy");

  // Replication clusters.
  auto repl = std::make_shared<std::vector<std::string>>();
  g.verb("set-clusters", "Set the clusters the namespace replicates to", "POST", "replication",
         "Set the replication clusters of", [repl]() -> Result<Json> { return Json(*repl); })
      ->add_option("-c,--clusters", *repl, "Clusters (comma separated)")->required()->delimiter(',');
  g.verb("get-clusters", "Show the clusters the namespace replicates to", "GET", "replication", "");
}

}  // namespace magnetar::cli
