// `magnetar trace <topic> --key K | --message-id L:E | --property k=v |
// --producer P [--from ms --to ms] [--json]`: where a message went, from the
// namespace's traces (GET .../{topic}/trace). Exit codes: 0 found, 1 not
// found or the server could not answer (the reason on stderr), 2 usage.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/admin_cli.h"
#include "cli/commands.h"
#include "cli/http_client.h"
#include "cli/token_flags.h"

namespace magnetar::cli {

using common::Result;
using common::Status;

namespace {

struct TraceOptions {
  std::string url = "http://localhost:8080";
  TokenFlags token;
  std::string topic;
  std::string message_id;
  std::string key;
  std::string property;
  std::string producer;
  int64_t from_ms = -1;
  int64_t to_ms = -1;
  int64_t limit = 0;
  bool json = false;
};

std::string str(const Json& j, const char* name) {
  auto it = j.find(name);
  return it == j.end() || !it->is_string() ? std::string() : it->get<std::string>();
}

// "subscription s1, consumer c (pulsar 127.0.0.1:5000)", the parts there are.
std::string who(const Json& s) {
  std::vector<std::string> parts;
  if (auto p = str(s, "producer"); !p.empty()) parts.push_back("producer " + p);
  if (auto sub = str(s, "subscription"); !sub.empty()) parts.push_back("subscription " + sub);
  if (auto c = str(s, "consumer"); !c.empty()) parts.push_back("consumer " + c);
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  std::string client = str(s, "protocol");
  if (auto a = str(s, "clientAddress"); !a.empty()) client += (client.empty() ? "" : " ") + a;
  if (!client.empty()) out += (out.empty() ? "" : " ") + ("(" + client + ")");
  if (s.contains("after")) out += (out.empty() ? "" : " ") + fmt::format("[after {} through {}]", str(s, "after"), str(s, "through"));
  if (s.value("redeliveryCount", 0) > 0) out += fmt::format(" redelivery {}", s.value("redeliveryCount", 0));
  if (auto d = str(s, "detail"); !d.empty()) out += (out.empty() ? "" : "  ") + d;
  return out;
}

void print_timeline(const Json& m) {
  std::vector<std::string> props;
  std::string keys;
  const Json messages = m.value("messages", Json::array());
  for (const auto& one : messages) {
    if (one.contains("key") && one["key"].is_string()) keys += (keys.empty() ? "" : ",") + one["key"].get<std::string>();
    const Json properties = one.value("properties", Json::object());
    for (const auto& [k, v] : properties.items()) {
      props.push_back(k + "=" + (v.is_string() ? v.get<std::string>() : v.dump()));
    }
  }
  std::string props_text;
  for (size_t i = 0; i < props.size(); ++i) props_text += (i ? " " : "") + props[i];
  fmt::print("message {}{}  producer {}  key {}  properties {}  traceparent {}\n", str(m, "messageId"),
             m.contains("batchIndex") ? fmt::format(" (batch index {})", m["batchIndex"].get<int>()) : "",
             str(m, "producer"), keys.empty() ? "-" : keys, props_text.empty() ? "-" : props_text,
             m["traceparent"].is_string() ? m["traceparent"].get<std::string>() : "-");
  const Json stages = m.value("stages", Json::array());
  for (const auto& s : stages) {
    fmt::print("  {:<24}  {:>+8} ms  {:<13}  {}\n", str(s, "isoTime"), s.value("latencyMs", int64_t{0}),
               str(s, "stage"), who(s));
  }
}

int run_trace(const TraceOptions& o) {
  int given = !o.message_id.empty() + !o.key.empty() + !o.property.empty() + !o.producer.empty();
  if (given == 0) {
    fmt::print(stderr, "magnetar trace: give --message-id, --key, --property or --producer\n");
    return 2;
  }
  auto path = topic_path(o.topic, "trace");
  if (!path.is_ok()) {
    fmt::print(stderr, "magnetar trace: {}\n", path.status().message());
    return 2;
  }
  std::string query;
  auto add = [&](const char* name, const std::string& v) {
    if (v.empty()) return;
    query += (query.empty() ? "?" : "&") + std::string(name) + "=" + escape_segment(v);
  };
  add("messageId", o.message_id);
  add("key", o.key);
  add("property", o.property);
  add("producer", o.producer);
  if (o.from_ms >= 0) add("from", std::to_string(o.from_ms));
  if (o.to_ms >= 0) add("to", std::to_string(o.to_ms));
  if (o.limit > 0) add("limit", std::to_string(o.limit));
  auto url = Url::parse(o.url);
  if (!url.is_ok()) {
    fmt::print(stderr, "magnetar trace: {}\n", url.status().message());
    return 2;
  }
  auto token = o.token.resolve();
  if (!token.is_ok()) {
    fmt::print(stderr, "magnetar trace: {}\n", token.status().message());
    return 2;
  }
  url->bearer_token = *token;
  url->tls = o.token.tls.options(url->tls.enabled);
  auto reply = http_request(*url, "GET", *path + query);
  if (!reply.is_ok()) {
    fmt::print(stderr, "magnetar trace: {}\n", reply.status().message());
    return 1;
  }
  Json body = Json::parse(reply->body, nullptr, /*allow_exceptions=*/false);
  if (reply->status != 200 || body.is_discarded()) {
    std::string reason = reply->body;
    if (!body.is_discarded() && body.is_object() && body.contains("reason")) reason = str(body, "reason");
    fmt::print(stderr, "magnetar trace: {} (HTTP {})\n", reason, reply->status);
    return 1;
  }
  if (o.json) {
    fmt::print("{}\n", body.dump());
    return 0;
  }
  const Json messages = body.value("messages", Json::array());
  for (const auto& m : messages) print_timeline(m);
  if (body.value("truncated", false)) fmt::print("(more matched; narrow the query or raise --limit)\n");
  return 0;
}

}  // namespace

CLI::App* add_trace_command(CLI::App& app, Command& run) {
  auto o = std::make_shared<TraceOptions>();
  auto* cmd = app.add_subcommand("trace", "Show where a message went: each stage with its time and latency");
  cmd->add_option("topic", o->topic, "Topic, e.g. persistent://public/default/orders or just orders")->required();
  cmd->add_option("--message-id", o->message_id, "ledgerId:entryId");
  cmd->add_option("-k,--key", o->key, "Message key");
  cmd->add_option("-p,--property", o->property, "A property's name=value (or name:value), e.g. order-id=1234");
  cmd->add_option("--producer", o->producer, "Producer name (with --from/--to for a time window)");
  cmd->add_option("--from", o->from_ms, "Received at or after (ms since the epoch)");
  cmd->add_option("--to", o->to_ms, "Received at or before (ms since the epoch)");
  cmd->add_option("--limit", o->limit, "Messages shown at most (default 100)");
  cmd->add_option("--url", o->url, "The node's HTTP address")->capture_default_str();
  add_token_flags(*cmd, o->token);
  cmd->add_flag("--json", o->json, "Print the server's JSON");
  cmd->footer(
      "Examples:\n"
      "  magnetar admin namespaces set-tracing public/default --mode all\n"
      "  magnetar trace orders --key user-1\n"
      "  magnetar trace persistent://acme/app/orders --property order-id=1234 --json\n");
  cmd->callback([&run, o]() { run = [o]() { return run_trace(*o); }; });
  return cmd;
}

}  // namespace magnetar::cli
