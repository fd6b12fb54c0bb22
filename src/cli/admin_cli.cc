// `magnetar admin`: the shared request path, output and argument parsing.
#include "cli/admin_cli.h"

#include <cctype>
#include <charconv>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "broker/naming.h"
#include "cli/http_client.h"

namespace magnetar::cli {

using common::Result;
using common::Status;

namespace {

int send(const AdminOptions& options, const AdminRequest& req) {
  auto url = options.target();
  if (!url.is_ok()) {
    fmt::print(stderr, "magnetar admin: {}\n", url.status().message());
    return 2;
  }
  auto reply = http_request(*url, req.method, req.path, req.body);
  // A cluster member that does not own a topic sends the call to its owner
  // (307, as Pulsar does); follow it a few hops, keeping the token.
  for (int hop = 0; hop < 3 && reply.is_ok() && (reply->status == 307 || reply->status == 308); hop++) {
    auto location = reply->headers.find("location");
    if (location == reply->headers.end()) break;
    auto moved = Url::parse(location->second);
    if (!moved.is_ok()) break;
    moved->bearer_token = url->bearer_token;
    const bool tls = moved->tls.enabled;  // as the new URL says; the trust settings as given
    moved->tls = url->tls;
    moved->tls.enabled = tls;
    std::string path = moved->base_path.empty() ? "/" : moved->base_path;
    moved->base_path.clear();
    reply = http_request(*moved, req.method, path, req.body);
  }
  if (!reply.is_ok()) {
    fmt::print(stderr, "magnetar admin: {}\n", reply.status().message());
    return 1;
  }
  Json body = Json::parse(reply->body, nullptr, /*allow_exceptions=*/false);
  if (reply->status >= 300) {
    std::string reason = reply->body;
    if (!body.is_discarded() && body.is_object() && body.contains("reason") && body["reason"].is_string()) {
      reason = body["reason"].get<std::string>();
    }
    fmt::print(stderr, "magnetar admin: {} (HTTP {})\n", reason, reply->status);
    return 1;
  }
  if (reply->body.empty()) {
    if (!options.json && !req.done.empty()) fmt::print("{}\n", req.done);
    return 0;
  }
  if (body.is_discarded()) {
    fmt::print("{}\n", reply->body);
    return 0;
  }
  if (options.json) {
    fmt::print("{}\n", body.dump());
  } else if (req.print) {
    req.print(body);
  } else {
    print_json_human(body);
  }
  return 0;
}

Result<int64_t> parse_number_with_unit(const std::string& s, std::string_view what,
                                       const std::function<int64_t(char)>& unit) {
  if (s == "-1") return -1;
  if (s.empty()) return Status::invalid_argument(std::string(what) + " is empty");
  std::string_view digits(s);
  int64_t multiplier = 1;
  if (!std::isdigit(static_cast<unsigned char>(s.back()))) {
    multiplier = unit(s.back());
    if (multiplier == 0) return Status::invalid_argument(fmt::format("{} '{}' has an unknown unit", what, s));
    digits.remove_suffix(1);
  }
  int64_t n = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end != digits.data() + digits.size() || n < 0) {
    return Status::invalid_argument(fmt::format("{} '{}' is not a number", what, s));
  }
  return n * multiplier;
}

}  // namespace

CLI::App* add_verb(CLI::App& group, Command& run, std::shared_ptr<AdminOptions> options, const std::string& name,
                   const std::string& description, RequestMaker make) {
  auto* verb = group.add_subcommand(name, description);
  verb->fallthrough();
  verb->callback([&run, options, make = std::move(make)]() {
    run = [options, make]() {
      auto req = make();
      if (!req.is_ok()) {
        fmt::print(stderr, "magnetar admin: {}\n", req.status().message());
        return 2;
      }
      return send(*options, *req);
    };
  });
  return verb;
}

Result<std::string> namespace_path(const std::string& ns, const std::string& suffix) {
  auto name = broker::NamespaceName::parse(ns);
  if (!name.is_ok()) return name.status();
  std::string path = "/admin/v2/namespaces/" + escape_segment(name->tenant) + "/" + escape_segment(name->local);
  if (!suffix.empty()) path += "/" + suffix;
  return path;
}

Result<std::string> topic_path(const std::string& topic, const std::string& suffix) {
  auto name = broker::TopicName::parse(topic);
  if (!name.is_ok()) return name.status();
  std::string path = fmt::format("/admin/v2/{}/{}/{}/{}", broker::domain_name(name->domain),
                                 escape_segment(name->ns.tenant), escape_segment(name->ns.local),
                                 escape_segment(name->local));
  if (!suffix.empty()) path += "/" + suffix;
  return path;
}

Result<int64_t> parse_duration_seconds(const std::string& s) {
  return parse_number_with_unit(s, "duration", [](char c) -> int64_t {
    switch (c) {
      case 's': return 1;
      case 'm': return 60;
      case 'h': return 3600;
      case 'd': return 86400;
      case 'w': return 7 * 86400;
      default: return 0;
    }
  });
}

Result<int64_t> parse_size_bytes(const std::string& s) {
  return parse_number_with_unit(s, "size", [](char c) -> int64_t {
    switch (std::tolower(static_cast<unsigned char>(c))) {
      case 'k': return int64_t{1} << 10;
      case 'm': return int64_t{1} << 20;
      case 'g': return int64_t{1} << 30;
      case 't': return int64_t{1} << 40;
      default: return 0;
    }
  });
}

std::string human_value(const Json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::string out;
    for (const auto& e : v) {
      if (!out.empty()) out += ",";
      out += human_value(e);
    }
    return out.empty() ? "-" : out;
  }
  if (v.is_object()) {
    if (v.empty()) return "-";
    std::string out;
    for (const auto& [k, e] : v.items()) {
      if (!out.empty()) out += " ";
      out += k + "=" + (e.is_object() ? e.dump() : human_value(e));
    }
    return out;
  }
  return v.dump();
}

void print_json_human(const Json& j) {
  if (j.is_array()) {
    for (const auto& e : j) fmt::print("{}\n", human_value(e));
    return;
  }
  if (!j.is_object()) {
    fmt::print("{}\n", human_value(j));
    return;
  }
  size_t width = 0;
  for (const auto& [k, v] : j.items()) width = std::max(width, k.size());
  for (const auto& [k, v] : j.items()) fmt::print("{:<{}}  {}\n", k, width, human_value(v));
}

Result<Url> AdminOptions::target() const {
  auto parsed = Url::parse(url);
  if (!parsed.is_ok()) return parsed;
  auto t = token.resolve();
  if (!t.is_ok()) return t.status();
  parsed->bearer_token = *t;
  parsed->tls = token.tls.options(parsed->tls.enabled);
  return parsed;
}

CLI::App* add_admin_command(CLI::App& app, Command& run) {
  auto options = std::make_shared<AdminOptions>();
  auto* admin = app.add_subcommand("admin", "Manage clusters, tenants, namespaces and topics over the REST API");
  admin->require_subcommand(1);
  admin->fallthrough();
  admin->add_option("--url", options->url, "The node's HTTP address")->capture_default_str();
  admin->add_flag("--json", options->json, "Print the server's JSON for scripts instead of tables");
  add_token_flags(*admin, options->token);
  admin->footer(
      "Examples:\n"
      "  magnetar admin tenants create acme --allowed-clusters standalone\n"
      "  magnetar admin namespaces create acme/orders\n"
      "  magnetar admin namespaces set-retention acme/orders --time 3d --size 10G\n"
      "  magnetar admin topics create-partitioned-topic persistent://acme/orders/created -p 4\n"
      "  magnetar admin --url http://10.0.0.5:8080 --json tenants list\n");
  auto* brokers = admin->add_subcommand("brokers", "This node's health");
  brokers->require_subcommand(1);
  brokers->fallthrough();
  add_verb(*brokers, run, options, "healthcheck", "Exit 0 when the node answers its health check",
           []() -> Result<AdminRequest> { return AdminRequest{"GET", "/admin/v2/brokers/health", "", "", nullptr}; });
  auto* cluster = admin->add_subcommand("cluster", "The members of this node's cluster");
  cluster->require_subcommand(1);
  cluster->fallthrough();
  add_verb(*cluster, run, options, "nodes", "Each member: id, addresses, Raft role, alive, bundles owned",
           []() -> Result<AdminRequest> {
             AdminRequest req{"GET", "/admin/v2/cluster/nodes", "", "", nullptr};
             req.print = [](const Json& nodes) {
               fmt::print("{:<18} {:<22} {:<9} {:<7} {:<6} {:>7}  {}\n", "ID", "CLUSTER ADDRESS", "ROLE", "LEADER",
                          "ALIVE", "BUNDLES", "PULSAR / KAFKA");
               for (const auto& n : nodes) {
                 fmt::print("{:<18} {:<22} {:<9} {:<7} {:<6} {:>7}  {} {}\n", human_value(n.value("id", Json())),
                            n.value("clusterAddress", ""), n.value("raftRole", ""),
                            n.value("leader", false) ? "yes" : "", n.value("alive", false) ? "yes" : "no",
                            n.contains("ownedBundles") ? n["ownedBundles"].size() : 0, n.value("brokerServiceUrl", ""),
                            n.value("kafkaAddress", ""));
               }
             };
             return req;
           });
  add_verb(*cluster, run, options, "storage",
           "The storage nodes (copies each holds, state), copies short and what self-healing is doing",
           []() -> Result<AdminRequest> {
             AdminRequest req{"GET", "/admin/v2/cluster/storage", "", "", nullptr};
             req.print = [](const Json& view) {
               fmt::print("{:<18} {:<6} {:<12} {:<9} {:>9} {:>8}\n", "NODE", "ALIVE", "ZONE", "STATE", "FRAGMENTS",
                          "LEDGERS");
               for (const auto& n : view.value("storageNodes", Json::array())) {
                 fmt::print("{:<18} {:<6} {:<12} {:<9} {:>9} {:>8}\n", human_value(n.value("id", Json())),
                            n.value("alive", false) ? "yes" : "no", n.value("zone", ""), n.value("state", ""),
                            n.value("fragments", 0), n.value("ledgers", 0));
               }
               fmt::print("{} ledgers; {} copies under-replicated\n", view.value("ledgers", 0),
                          view.value("underReplicatedFragments", 0));
               const Json healing = view.value("healing", Json());
               if (!healing.is_object()) return;
               fmt::print("self-healing on node {}: {} fragments and {:.1f} MiB healed", human_value(healing["healer"]),
                          healing.value("healedFragments", 0), healing.value("healedBytes", 0.0) / (1 << 20));
               if (healing.value("copying", false) && healing.contains("copy")) {
                 const Json& c = healing["copy"];
                 fmt::print("; copying ledger {} entries {}..{} (at {}) from node {} to node {}, {:.1f} MiB/s",
                            human_value(c["ledger"]), human_value(c["firstEntry"]), human_value(c["lastEntry"]),
                            human_value(c["nextEntry"]), human_value(c["fromNode"]), human_value(c["toNode"]),
                            c.value("bytesPerSecond", 0.0) / (1 << 20));
               }
               fmt::print("\n");
             };
             return req;
           });
  // Decommissioning a storage node: start, follow, cancel.
  struct Decommission {
    const char* verb;
    const char* method;
    const char* help;
  };
  for (const Decommission& d :
       {Decommission{"decommission", "POST",
                     "Move every ledger copy off a storage node, which then gets no new ones; prints its progress"},
        Decommission{"decommission-status", "GET",
                     "A storage node's state (active, draining, drained) and the copies still on it"},
        Decommission{"recommission", "DELETE", "Cancel a decommission: the node gets new copies again"}}) {
    auto node = std::make_shared<uint64_t>(0);
    auto* verb = add_verb(*cluster, run, options, d.verb, d.help, [node, method = d.method]() -> Result<AdminRequest> {
      AdminRequest req{method, "/admin/v2/cluster/nodes/" + std::to_string(*node) + "/decommission", "", "", nullptr};
      req.print = [](const Json& s) {
        fmt::print("node {}: {} ({} fragments of {} ledgers still on it; {} under-replicated in the cluster)\n",
                   human_value(s.value("id", Json())), s.value("state", ""), s.value("fragments", 0),
                   s.value("ledgers", 0), s.value("underReplicatedFragments", 0));
      };
      return req;
    });
    verb->add_option("node", *node, "The node's id (magnetar admin cluster nodes)")->required();
  }
  add_cluster_commands(*admin, run, options);
  add_tenant_commands(*admin, run, options);
  add_namespace_commands(*admin, run, options);
  add_topic_commands(*admin, run, options);
  add_trial_commands(*admin, run, options);
  add_scram_user_commands(*admin, run, options);
  return admin;
}

}  // namespace magnetar::cli
