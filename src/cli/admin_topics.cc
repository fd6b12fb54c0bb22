// `magnetar admin topics ...`: partitioned-topic metadata, topic lists and
// topic-level policy overrides (set-X / get-X [--applied] / remove-X).
// Topic names: persistent://tenant/ns/topic, non-persistent://..., tenant/ns/topic
// or a bare name in public/default.
#include <CLI/CLI.hpp>

#include "cli/admin_cli.h"
#include "cli/admin_policy_verbs.h"
#include "cli/http_client.h"

namespace magnetar::cli {

using common::Result;

namespace {

std::string domain_of(const std::string& ns_or_domain) {
  return ns_or_domain.rfind("non-persistent://", 0) == 0 ? "non-persistent" : "persistent";
}

// "tenant/ns" or "persistent://tenant/ns" -> (domain, "tenant/ns").
std::pair<std::string, std::string> split_domain(const std::string& ns) {
  auto scheme = ns.find("://");
  if (scheme == std::string::npos) return {"persistent", ns};
  return {domain_of(ns), ns.substr(scheme + 3)};
}

}  // namespace

void add_topic_commands(CLI::App& admin, Command& run, std::shared_ptr<AdminOptions> options) {
  auto* app = admin.add_subcommand("topics", "Topics: create, delete, stats, subscriptions, partitioned-topic metadata and policy overrides");
  app->require_subcommand(1);
  app->fallthrough();

  for (bool create : {true, false}) {
    auto topic = std::make_shared<std::string>();
    auto partitions = std::make_shared<int32_t>(0);
    auto* v = add_verb(*app, run, options, create ? "create-partitioned-topic" : "update-partitioned-topic",
                       create ? "Create a partitioned topic" : "Add partitions to a partitioned topic",
                       [topic, partitions, create]() -> Result<AdminRequest> {
                         auto path = topic_path(*topic, "partitions");
                         if (!path.is_ok()) return path.status();
                         return AdminRequest{create ? "PUT" : "POST", *path, Json(*partitions).dump(),
                                             (create ? "Created " : "Updated ") + *topic, nullptr};
                       });
    v->add_option("topic", *topic, "Topic name")->required();
    v->add_option("-p,--partitions", *partitions, "Number of partitions")->required();
  }

  auto meta = std::make_shared<std::string>();
  add_verb(*app, run, options, "get-partitioned-topic-metadata", "Show the partition count (0: not partitioned)",
           [meta]() -> Result<AdminRequest> {
             auto path = topic_path(*meta, "partitions");
             if (!path.is_ok()) return path.status();
             return AdminRequest{"GET", *path, "", "", nullptr};
           })->add_option("topic", *meta, "Topic name")->required();

  auto victim = std::make_shared<std::string>();
  add_verb(*app, run, options, "delete-partitioned-topic", "Delete a partitioned topic's metadata",
           [victim]() -> Result<AdminRequest> {
             auto path = topic_path(*victim, "partitions");
             if (!path.is_ok()) return path.status();
             return AdminRequest{"DELETE", *path, "", "Deleted " + *victim, nullptr};
           })->add_option("topic", *victim, "Topic name")->required();

  for (bool partitioned : {false, true}) {
    auto ns = std::make_shared<std::string>();
    add_verb(*app, run, options, partitioned ? "list-partitioned-topics" : "list",
             partitioned ? "List the partitioned topics of a namespace" : "List the topics of a namespace",
             [ns, partitioned]() -> Result<AdminRequest> {
               auto [domain, name] = split_domain(*ns);
               auto path = namespace_path(name);
               if (!path.is_ok()) return path.status();
               // namespaces/{t}/{ns} -> {domain}/{t}/{ns}
               std::string p = "/admin/v2/" + domain + path->substr(std::string("/admin/v2/namespaces").size());
               if (partitioned) p += "/partitioned";
               return AdminRequest{"GET", p, "", "", nullptr};
             })->add_option("namespace", *ns, "tenant/namespace (prefix non-persistent:// for that domain)")->required();
  }

  add_topic_broker_verbs(*app, run, options);

  PolicyVerbs g{*app, run, options, "topic", "Topic name",
                [](const std::string& topic, const std::string& suffix) { return topic_path(topic, suffix); }, true};
  add_shared_policy_verbs(g, {"deduplicationEnabled", "max-producers", "maxProducers", "-p,--max-producers",
                              "max-consumers", "maxConsumers", "-c,--max-consumers"});
  g.permissions();
}

}  // namespace magnetar::cli
