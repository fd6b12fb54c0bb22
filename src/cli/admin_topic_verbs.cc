// `magnetar admin topics ...` verbs for topics the broker serves: create,
// delete, stats, subscriptions and their cursors, peek, unload, lookup and
// compaction.
#include <chrono>
#include <cstdio>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/clock.h"
#include "cli/admin_cli.h"
#include "cli/http_client.h"

namespace magnetar::cli {

using common::Result;
using common::Status;

namespace {

struct TopicFlags {
  std::string topic;
  std::string subscription;
  bool force = false;
};

// A verb on one topic (and maybe one subscription) that sends one request.
CLI::App* topic_verb(CLI::App& app, Command& run, std::shared_ptr<AdminOptions> options, const std::string& name,
                     const std::string& description, bool needs_subscription,
                     std::function<Result<AdminRequest>(const TopicFlags&)> make,
                     std::shared_ptr<TopicFlags> flags = std::make_shared<TopicFlags>()) {
  auto* v = add_verb(app, run, options, name, description, [flags, make]() { return make(*flags); });
  v->add_option("topic", flags->topic, "Topic name")->required();
  if (needs_subscription) v->add_option("-s,--subscription", flags->subscription, "Subscription name")->required();
  return v;
}

Result<std::string> subscription_path(const TopicFlags& f, const std::string& suffix = "") {
  return topic_path(f.topic, "subscription/" + escape_segment(f.subscription) + (suffix.empty() ? "" : "/" + suffix));
}

std::string number(const Json& j, const char* key) {
  if (!j.contains(key)) return "-";
  const Json& v = j[key];
  if (v.is_number_float()) return fmt::format("{:.2f}", v.get<double>());
  return human_value(v);
}

void print_stats(const Json& s) {
  static const char* kFields[] = {"msgRateIn",     "msgThroughputIn", "msgRateOut",     "msgThroughputOut",
                                  "msgInCounter",  "bytesInCounter",  "msgOutCounter",  "bytesOutCounter",
                                  "averageMsgSize", "storageSize",    "backlogSize"};
  for (const char* f : kFields) fmt::print("{:<18}{}\n", f, number(s, f));
  fmt::print("{:<18}{}\n", "publishers", s.contains("publishers") ? s["publishers"].size() : 0);
  if (!s.contains("subscriptions") || s["subscriptions"].empty()) {
    fmt::print("subscriptions     -\n");
    return;
  }
  fmt::print("\n{:<24}{:<12}{:>12}{:>11}{:>12}{:>12}\n", "SUBSCRIPTION", "TYPE", "BACKLOG", "CONSUMERS", "UNACKED",
             "RATE OUT");
  for (const auto& [name, sub] : s["subscriptions"].items()) {
    fmt::print("{:<24}{:<12}{:>12}{:>11}{:>12}{:>12}\n", name, human_value(sub.value("type", Json())),
               number(sub, "msgBacklog"), sub.contains("consumers") ? sub["consumers"].size() : 0,
               number(sub, "unackedMessages"), number(sub, "msgRateOut"));
  }
}

// peek-messages: one request per position, printing each message.
void add_peek(CLI::App& app, Command& run, std::shared_ptr<AdminOptions> options) {
  auto f = std::make_shared<TopicFlags>();
  auto count = std::make_shared<int>(1);
  auto* v = app.add_subcommand("peek-messages", "Show the next messages of a subscription without consuming them");
  v->fallthrough();
  v->add_option("topic", f->topic, "Topic name")->required();
  v->add_option("-s,--subscription", f->subscription, "Subscription name")->required();
  v->add_option("-n,--count", *count, "How many messages")->capture_default_str();
  v->callback([&run, options, f, count]() {
    run = [options, f, count]() {
      if (*count < 1) {
        fmt::print(stderr, "magnetar admin: --count must be at least 1\n");
        return 2;
      }
      auto url = options->target();
      if (!url.is_ok()) {
        fmt::print(stderr, "magnetar admin: {}\n", url.status().message());
        return 2;
      }
      Json all = Json::array();
      for (int i = 1; i <= *count; ++i) {
        auto path = subscription_path(*f, "position/" + std::to_string(i));
        if (!path.is_ok()) {
          fmt::print(stderr, "magnetar admin: {}\n", path.status().message());
          return 2;
        }
        auto reply = http_request(*url, "GET", *path);
        if (!reply.is_ok()) {
          fmt::print(stderr, "magnetar admin: {}\n", reply.status().message());
          return 1;
        }
        if (reply->status == 404 && i > 1) break;  // fewer messages than asked for
        if (reply->status != 200) {
          Json body = Json::parse(reply->body, nullptr, false);
          std::string reason = !body.is_discarded() && body.is_object() && body.contains("reason")
                                   ? body["reason"].get<std::string>()
                                   : reply->body;
          fmt::print(stderr, "magnetar admin: {} (HTTP {})\n", reason, reply->status);
          return 1;
        }
        auto header = [&](const char* name) {
          auto it = reply->headers.find(name);
          return it == reply->headers.end() ? std::string() : it->second;
        };
        Json m = {{"messageId", header("x-pulsar-message-id")},
                  {"publishTime", header("x-pulsar-publish-time")},
                  {"producerName", header("x-pulsar-producer-name")},
                  {"sequenceId", header("x-pulsar-sequence-id")},
                  {"payload", reply->body}};
        if (options->json) {
          all.push_back(m);
        } else {
          fmt::print("Message ID: {}\nPublish time: {}\nProducer: {}\n{}\n\n", header("x-pulsar-message-id"),
                     header("x-pulsar-publish-time"), header("x-pulsar-producer-name"), reply->body);
        }
      }
      if (options->json) fmt::print("{}\n", all.dump(-1, ' ', false, Json::error_handler_t::replace));
      return 0;
    };
  });
}

}  // namespace

void add_topic_broker_verbs(CLI::App& app, Command& run, std::shared_ptr<AdminOptions> options) {
  topic_verb(app, run, options, "create", "Create a non-partitioned topic", false,
             [](const TopicFlags& f) -> Result<AdminRequest> {
               auto path = topic_path(f.topic);
               if (!path.is_ok()) return path.status();
               return AdminRequest{"PUT", *path, "", "Created " + f.topic, nullptr};
             });

  auto del = std::make_shared<TopicFlags>();
  topic_verb(app, run, options, "delete", "Delete a topic, its messages and subscriptions", false,
             [](const TopicFlags& f) -> Result<AdminRequest> {
               auto path = topic_path(f.topic);
               if (!path.is_ok()) return path.status();
               return AdminRequest{"DELETE", *path + (f.force ? "?force=true" : ""), "", "Deleted " + f.topic, nullptr};
             }, del)
      ->add_flag("-f,--force", del->force, "Delete even with producers or consumers connected");

  topic_verb(app, run, options, "stats", "Show a topic's rates, counters and subscriptions", false,
             [](const TopicFlags& f) -> Result<AdminRequest> {
               auto path = topic_path(f.topic, "stats");
               if (!path.is_ok()) return path.status();
               return AdminRequest{"GET", *path, "", "", print_stats};
             });
  topic_verb(app, run, options, "partitioned-stats", "Show a partitioned topic's stats, summed over partitions",
             false, [](const TopicFlags& f) -> Result<AdminRequest> {
               auto path = topic_path(f.topic, "partitioned-stats");
               if (!path.is_ok()) return path.status();
               return AdminRequest{"GET", *path, "", "", print_stats};
             });
  topic_verb(app, run, options, "internal-stats", "Show a topic's ledgers and cursors", false,
             [](const TopicFlags& f) -> Result<AdminRequest> {
               auto path = topic_path(f.topic, "internalStats");
               if (!path.is_ok()) return path.status();
               return AdminRequest{"GET", *path, "", "", nullptr};
             });
  topic_verb(app, run, options, "subscriptions", "List a topic's subscriptions", false,
             [](const TopicFlags& f) -> Result<AdminRequest> {
               auto path = topic_path(f.topic, "subscriptions");
               if (!path.is_ok()) return path.status();
               return AdminRequest{"GET", *path, "", "", nullptr};
             });

  auto start = std::make_shared<std::string>("latest");
  topic_verb(app, run, options, "create-subscription", "Create a subscription with no consumer", true,
             [start](const TopicFlags& f) -> Result<AdminRequest> {
               if (*start != "latest" && *start != "earliest") {
                 return Status::invalid_argument("--messageId must be latest or earliest");
               }
               auto path = subscription_path(f);
               if (!path.is_ok()) return path.status();
               return AdminRequest{"PUT", *path + "?messageId=" + *start, "",
                                   "Created subscription " + f.subscription, nullptr};
             })
      ->add_option("-m,--messageId", *start, "Where it starts: latest or earliest")
      ->capture_default_str();

  auto unsub = std::make_shared<TopicFlags>();
  topic_verb(app, run, options, "unsubscribe", "Delete a subscription", true,
             [](const TopicFlags& f) -> Result<AdminRequest> {
               auto path = subscription_path(f);
               if (!path.is_ok()) return path.status();
               return AdminRequest{"DELETE", *path + (f.force ? "?force=true" : ""), "",
                                   "Deleted subscription " + f.subscription, nullptr};
             }, unsub)
      ->add_flag("-f,--force", unsub->force, "Delete even with consumers connected");

  topic_verb(app, run, options, "skip-all", "Acknowledge a subscription's whole backlog", true,
             [](const TopicFlags& f) -> Result<AdminRequest> {
               auto path = subscription_path(f, "skip_all");
               if (!path.is_ok()) return path.status();
               return AdminRequest{"POST", *path, "", "Skipped the backlog of " + f.subscription, nullptr};
             });

  auto skip = std::make_shared<int64_t>(0);
  topic_verb(app, run, options, "skip", "Acknowledge the next N messages of a subscription", true,
             [skip](const TopicFlags& f) -> Result<AdminRequest> {
               if (*skip < 0) return Status::invalid_argument("--count must not be negative");
               auto path = subscription_path(f, "skip/" + std::to_string(*skip));
               if (!path.is_ok()) return path.status();
               return AdminRequest{"POST", *path, "", fmt::format("Skipped {} messages", *skip), nullptr};
             })
      ->add_option("-n,--count", *skip, "How many messages")
      ->required();

  struct Reset {
    std::string time;
    int64_t timestamp = -1;
    std::string message;  // "ledger:entry"
    bool excluded = false;
  };
  auto reset = std::make_shared<Reset>();
  auto* rc = topic_verb(app, run, options, "reset-cursor",
                        "Move a subscription back (or forward) to the messages published since a time", true,
                        [reset](const TopicFlags& f) -> Result<AdminRequest> {
                          if (!reset->message.empty()) {
                            unsigned long long ledger = 0;
                            long long entry = 0;
                            char tail = 0;
                            if (std::sscanf(reset->message.c_str(), "%llu:%lld%c", &ledger, &entry, &tail) != 2 ||
                                entry < 0) {
                              return Status::invalid_argument("--messageId must be ledger:entry");
                            }
                            auto path = subscription_path(f, "resetcursor");
                            if (!path.is_ok()) return path.status();
                            Json body = {{"ledgerId", ledger}, {"entryId", entry}, {"isExcluded", reset->excluded}};
                            return AdminRequest{"POST", *path, body.dump(), "Reset subscription " + f.subscription,
                                                nullptr};
                          }
                          int64_t ts = reset->timestamp;
                          if (!reset->time.empty()) {
                            auto ago = parse_duration_seconds(reset->time);
                            if (!ago.is_ok()) return ago.status();
                            ts = common::wall_clock_ms() - *ago * 1000;
                          }
                          if (ts < 0) {
                            return Status::invalid_argument("give --time (e.g. 10m ago), --timestamp or --messageId");
                          }
                          auto path = subscription_path(f, "resetcursor/" + std::to_string(ts));
                          if (!path.is_ok()) return path.status();
                          return AdminRequest{"POST", *path, "", "Reset subscription " + f.subscription, nullptr};
                        });
  rc->add_option("-t,--time", reset->time, "How long ago: 30s, 10m, 2h, 3d");
  rc->add_option("--timestamp", reset->timestamp, "Milliseconds since the epoch");
  rc->add_option("-m,--messageId", reset->message, "The message to deliver next, as ledger:entry");
  rc->add_flag("-e,--exclude-message", reset->excluded, "With --messageId: start after that message");

  struct Expire {
    TopicFlags f;
    std::string time;
    bool all = false;
  };
  auto expire = std::make_shared<Expire>();
  auto* ex = add_verb(app, run, options, "expire-messages", "Acknowledge messages older than a time",
                      [expire]() -> Result<AdminRequest> {
                        auto secs = parse_duration_seconds(expire->time);
                        if (!secs.is_ok() || *secs < 0) return Status::invalid_argument("--time must be like 10m");
                        if (expire->all == !expire->f.subscription.empty()) {
                          return Status::invalid_argument("give either --subscription or --all-subscriptions");
                        }
                        auto path = expire->all ? topic_path(expire->f.topic,
                                                             "all_subscription/expireMessages/" + std::to_string(*secs))
                                                : subscription_path(expire->f, "expireMessages/" + std::to_string(*secs));
                        if (!path.is_ok()) return path.status();
                        return AdminRequest{"POST", *path, "", "Expired messages older than " + expire->time, nullptr};
                      });
  ex->add_option("topic", expire->f.topic, "Topic name")->required();
  ex->add_option("-s,--subscription", expire->f.subscription, "Subscription name");
  ex->add_flag("--all-subscriptions", expire->all, "Every subscription of the topic");
  ex->add_option("-t,--time", expire->time, "Older than: 30s, 10m, 2h, 3d")->required();

  add_peek(app, run, options);

  topic_verb(app, run, options, "unload", "Close a topic on this node; it loads again on next use", false,
             [](const TopicFlags& f) -> Result<AdminRequest> {
               auto path = topic_path(f.topic, "unload");
               if (!path.is_ok()) return path.status();
               return AdminRequest{"PUT", *path, "", "Unloaded " + f.topic, nullptr};
             });
  topic_verb(app, run, options, "compact", "Start compacting a persistent topic (latest value per key)", false,
             [](const TopicFlags& f) -> Result<AdminRequest> {
               auto path = topic_path(f.topic, "compaction");
               if (!path.is_ok()) return path.status();
               return AdminRequest{"PUT", *path, "", "Compaction started for " + f.topic, nullptr};
             });
  topic_verb(app, run, options, "compaction-status", "Show the status of a topic's latest compaction", false,
             [](const TopicFlags& f) -> Result<AdminRequest> {
               auto path = topic_path(f.topic, "compaction");
               if (!path.is_ok()) return path.status();
               return AdminRequest{"GET", *path, "", "", nullptr};
             });
  topic_verb(app, run, options, "lookup", "Show which broker serves a topic", false,
             [](const TopicFlags& f) -> Result<AdminRequest> {
               auto path = topic_path(f.topic);
               if (!path.is_ok()) return path.status();
               // /admin/v2/{domain}/... -> /lookup/v2/topic/{domain}/...
               return AdminRequest{"GET", "/lookup/v2/topic" + path->substr(std::string("/admin/v2").size()), "", "",
                                   nullptr};
             });
}

}  // namespace magnetar::cli
