// `magnetar produce` and `magnetar consume`: a Pulsar client on the command
// line, for trying a topic and for scripts.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>

#include "cli/commands.h"
#include "cli/token_flags.h"
#include "client/compression.h"
#include "client/producer.h"
#include "client/pulsar_client.h"

namespace magnetar::cli {
namespace {

struct ProduceArgs {
  std::string url = "pulsar://localhost:6650";
  TokenFlags token;
  std::string topic;
  std::vector<std::string> messages;
  std::vector<std::string> properties;  // k=v
  std::string key;
  int count = 1;
  std::string compression = "none";
  bool batch = false;
  bool json = false;
};

struct ConsumeArgs {
  std::string url = "pulsar://localhost:6650";
  TokenFlags token;
  std::string topic;
  std::string subscription;
  std::string type = "Exclusive";
  std::string position = "Latest";
  int count = 1;          // 0: until --timeout passes without a message
  double timeout_s = 10;  // how long to wait for a message
  bool reader = false;    // a non-durable reader instead of a subscription
  bool read_compacted = false;  // through the topic's compacted view
  std::string start_id;   // reader: "ledger:entry[:batch index]" to start after (or at, with `inclusive`)
  bool inclusive = false;
  bool json = false;
};

// "ledger:entry" or "ledger:entry:batch index", as produce --json prints ids.
common::Result<client::MessageId> parse_message_id(const std::string& text) {
  client::MessageId id;
  unsigned long long ledger = 0, entry = 0;
  int batch = -1, used = 0;
  const int n = std::sscanf(text.c_str(), "%llu:%llu%n:%d%n", &ledger, &entry, &used, &batch, &used);
  if (n < 2 || static_cast<size_t>(used) != text.size() || (n == 3 && batch < 0)) {
    return common::Status::invalid_argument("message id '" + text + "' is not ledger:entry or ledger:entry:batch-index");
  }
  id.ledger = ledger;
  id.entry = entry;
  id.batch_index = n == 3 ? batch : -1;
  return id;
}

int fail(const common::Status& st) {
  fmt::print(stderr, "magnetar: {}\n", st.message());
  return 1;
}

int run_produce(const ProduceArgs& a) {
  std::map<std::string, std::string> props;
  for (const auto& p : a.properties) {
    auto eq = p.find('=');
    if (eq == std::string::npos) {
      fmt::print(stderr, "magnetar: property '{}' is not key=value\n", p);
      return 2;
    }
    props[p.substr(0, eq)] = p.substr(eq + 1);
  }
  auto compression = client::parse_compression(a.compression);
  if (!compression) {
    fmt::print(stderr, "magnetar: unknown compression '{}' (none, lz4, zlib, zstd, snappy)\n", a.compression);
    return 2;
  }
  std::vector<std::string> messages = a.messages.empty() ? std::vector<std::string>{""} : a.messages;
  auto client_options = client_options_of(a.token);
  if (!client_options) return fail(client_options.status());
  // The member that serves the topic (in a cluster, its owner).
  auto url = client::PulsarClient::service_url_for(a.url, a.topic, *client_options);
  if (!url) return fail(url.status());
  int produced = 0;
  nlohmann::json ids = nlohmann::json::array();
  if (a.batch || *compression != client::CompressionType::NONE) {
    // The asynchronous producer: messages go out in batches (when asked) and
    // compressed; ids are reported in send order.
    client::ProducerOptions o;
    o.topic = a.topic;
    o.batching = a.batch;
    o.compression = *compression;
    auto producer = client::Producer::create(*url, o, *client_options);
    if (!producer) return fail(producer.status());
    std::vector<std::string> id_of(static_cast<size_t>(a.count) * messages.size());
    std::mutex mu;
    common::Status failed;
    size_t i = 0;
    for (int round = 0; round < a.count; ++round) {
      for (const auto& m : messages) {
        client::OutgoingMessage out;
        out.payload = m;
        out.key = a.key;
        out.properties = &props;
        auto st = (*producer)->send_async(out, [&, at = i++](common::Result<client::MessageId> r) {
          std::lock_guard g(mu);
          if (r.is_ok()) {
            id_of[at] = r->to_string();
          } else if (failed.is_ok()) {
            failed = r.status();
          }
        });
        if (!st.is_ok()) return fail(st);
      }
    }
    if (auto st = (*producer)->close(); !st.is_ok()) return fail(st);
    std::lock_guard g(mu);
    if (!failed.is_ok()) return fail(failed);
    for (auto& id : id_of) ids.push_back(id);
    produced = static_cast<int>(id_of.size());
  } else {
    auto client = client::PulsarClient::connect(*url, *client_options);
    if (!client) return fail(client.status());
    auto producer = (*client)->create_producer(a.topic);
    if (!producer) return fail(producer.status());
    for (int round = 0; round < a.count; ++round) {
      for (const auto& m : messages) {
        auto id = (*client)->send(*producer, m, props, a.key);
        if (!id) return fail(id.status());
        ids.push_back(id->to_string());
        ++produced;
      }
    }
    (void)(*client)->close_producer(*producer);
  }
  if (a.json) {
    fmt::print("{}\n", nlohmann::json{{"topic", a.topic}, {"produced", produced}, {"messageIds", ids}}.dump());
  } else {
    fmt::print("Produced {} message{} to {}\n", produced, produced == 1 ? "" : "s", a.topic);
  }
  return 0;
}

int run_consume(const ConsumeArgs& a) {
  client::SubscriptionType type = a.type == "Shared"      ? client::SubscriptionType::kShared
                                  : a.type == "Failover"  ? client::SubscriptionType::kFailover
                                  : a.type == "Key_Shared" ? client::SubscriptionType::kKeyShared
                                                          : client::SubscriptionType::kExclusive;
  auto client_options = client_options_of(a.token);
  if (!client_options) return fail(client_options.status());
  auto url = client::PulsarClient::service_url_for(a.url, a.topic, *client_options);
  if (!url) return fail(url.status());
  auto client = client::PulsarClient::connect(*url, *client_options);
  if (!client) return fail(client.status());
  std::optional<client::MessageId> start;
  if (!a.start_id.empty()) {
    auto id = parse_message_id(a.start_id);
    if (!id) return fail(id.status());
    start = *id;
  }
  (*client)->set_read_compacted(a.read_compacted);
  auto consumer = a.reader ? (*client)->create_reader(a.topic, start, a.position == "Earliest", 1000, a.inclusive)
                          : (*client)->subscribe(a.topic, a.subscription, type, a.position == "Earliest");
  if (!consumer) return fail(consumer.status());
  auto wait = std::chrono::milliseconds(static_cast<int64_t>(a.timeout_s * 1000));
  int got = 0;
  while (a.count == 0 || got < a.count) {
    auto m = (*client)->receive(*consumer, wait);
    if (!m) {
      if (m.status().code() == common::ErrorCode::kTimeout) break;
      return fail(m.status());
    }
    ++got;
    if (a.json) {
      fmt::print("{}\n", nlohmann::json{{"messageId", m->id.to_string()},
                                        {"partition", m->id.partition},
                                        {"payload", m->payload},
                                        {"properties", m->properties},
                                        {"key", m->key},
                                        {"producer", m->producer},
                                        {"publishTime", m->publish_time_ms},
                                        {"redeliveryCount", m->redelivery_count}}
                             .dump());
    } else {
      fmt::print("{}\n", m->payload);
    }
    if (!m->error.empty()) fmt::print(stderr, "magnetar: message {} cannot be read: {}\n", m->id.to_string(), m->error);
    std::fflush(stdout);
    if (a.reader) continue;
    if (auto st = (*client)->ack(*consumer, m->id); !st.is_ok()) return fail(st);
  }
  (void)(*client)->close_consumer(*consumer);
  if (a.count > 0 && got < a.count) {
    fmt::print(stderr, "magnetar: received {} of {} messages before the {} s timeout\n", got, a.count, a.timeout_s);
    return 1;
  }
  return 0;
}

}  // namespace

CLI::App* add_produce_command(CLI::App& app, Command& run) {
  auto a = std::make_shared<ProduceArgs>();
  auto* cmd = app.add_subcommand("produce", "Send messages to a topic with the Pulsar protocol");
  cmd->add_option("topic", a->topic, "Topic, e.g. persistent://public/default/my-topic or just my-topic")->required();
  cmd->add_option("-m,--message", a->messages, "Message payload (repeat for several)");
  cmd->add_option("-n,--count", a->count, "Send the messages this many times")->check(CLI::Range(1, 100000000));
  cmd->add_option("-p,--property", a->properties, "Message property key=value (repeat for several)");
  cmd->add_option("-k,--key", a->key, "Message key");
  cmd->add_option("--url", a->url, "Pulsar service URL")->capture_default_str();
  add_token_flags(*cmd, a->token);
  cmd->add_option("-z,--compression", a->compression, "Compress payloads: none, lz4, zlib, zstd or snappy")
      ->capture_default_str();
  cmd->add_flag("--batch", a->batch, "Send the messages in batches (asynchronously, like Pulsar clients)");
  cmd->add_flag("--json", a->json, "Print JSON with the message ids");
  cmd->footer("Examples:\n  magnetar produce my-topic -m hello -m world\n  magnetar produce persistent://acme/app/orders -m '{\"id\": 1}' -p source=cli -n 10\n");
  cmd->callback([&run, a]() { run = [a]() { return run_produce(*a); }; });
  return cmd;
}

CLI::App* add_consume_command(CLI::App& app, Command& run) {
  auto a = std::make_shared<ConsumeArgs>();
  auto* cmd = app.add_subcommand("consume", "Receive messages from a topic with the Pulsar protocol");
  cmd->add_option("topic", a->topic, "Topic, e.g. persistent://public/default/my-topic or just my-topic")->required();
  auto* sub = cmd->add_option("-s,--subscription", a->subscription, "Subscription name");
  cmd->add_flag("--reader", a->reader,
                "Read with a non-durable reader from --position instead of a subscription (nothing is acknowledged)")
      ->excludes(sub);
  auto* reader = cmd->get_option("--reader");
  cmd->add_option("--start-message-id", a->start_id,
                  "Reader: start after this message id (ledger:entry[:batch index], as --json prints them)")
      ->needs(reader);
  cmd->add_flag("--inclusive", a->inclusive, "Reader: start at --start-message-id itself")->needs(reader);
  cmd->add_flag("--read-compacted", a->read_compacted,
                "Read the topic's compacted view: the latest message of each key up to its compaction horizon, then "
                "everything after it (Exclusive or Failover)");
  cmd->add_option("-t,--subscription-type", a->type, "Exclusive, Shared, Failover or Key_Shared")
      ->capture_default_str()
      ->transform(CLI::IsMember({"Exclusive", "Shared", "Failover", "Key_Shared"}, CLI::ignore_case));
  cmd->add_option("-P,--position", a->position, "Where a new subscription starts: Latest or Earliest")
      ->capture_default_str()
      ->transform(CLI::IsMember({"Latest", "Earliest"}, CLI::ignore_case));
  cmd->add_option("-n,--count", a->count, "Messages to receive (0: until the timeout passes with none)")
      ->capture_default_str()->check(CLI::Range(0, 100000000));
  cmd->add_option("--timeout", a->timeout_s, "Seconds to wait for a message")->capture_default_str()->check(CLI::Range(0.1, 86400.0));
  cmd->add_option("--url", a->url, "Pulsar service URL")->capture_default_str();
  add_token_flags(*cmd, a->token);
  cmd->add_flag("--json", a->json, "Print one JSON object per message (id, payload, properties, ...)");
  cmd->footer("Examples:\n  magnetar consume my-topic -s my-sub -n 10\n  magnetar consume my-topic -s audit -P Earliest -n 0 --timeout 2 --json\n");
  cmd->callback([&run, a]() {
    if (!a->reader && a->subscription.empty()) throw CLI::RequiredError("--subscription (or --reader)");
    run = [a]() { return run_consume(*a); };
  });
  return cmd;
}

}  // namespace magnetar::cli
