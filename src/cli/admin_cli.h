// `magnetar admin ...`: pulsar-admin's verbs over the REST API.
//
// Every verb becomes one HTTP request (admin_*.cc declare them). Output is a
// human table by default and the server's JSON with --json. Exit codes: 0
// done, 1 the server refused or could not be reached (the reason goes to
// stderr), 2 a usage error.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/cli11_fwd.h"
#include "cli/commands.h"
#include "cli/http_client.h"
#include "cli/token_flags.h"
#include "common/result.h"

namespace magnetar::cli {

struct AdminOptions {
  std::string url = "http://localhost:8080";
  bool json = false;
  TokenFlags token;
  // The parsed --url, carrying the token.
  common::Result<Url> target() const;
};

using Json = nlohmann::json;
using Printer = std::function<void(const Json&)>;

// One REST call. `print` renders a 200 reply for humans (default: a table
// of the object, or one line per list item); `done` is printed for humans
// after a reply with no body.
struct AdminRequest {
  std::string method;
  std::string path;
  std::string body;
  std::string done;
  Printer print;
};

using RequestMaker = std::function<common::Result<AdminRequest>()>;

// Adds verb `name` to `group`; when chosen, `make` runs after parsing (so it
// sees the verb's flags) and its request is sent. An error from `make` is a
// usage error (exit 2).
CLI::App* add_verb(CLI::App& group, Command& run, std::shared_ptr<AdminOptions> options, const std::string& name,
                   const std::string& description, RequestMaker make);

// Paths with each segment escaped. "tenant/namespace" must have one '/'.
common::Result<std::string> namespace_path(const std::string& ns, const std::string& suffix = "");
// "persistent://t/ns/x", "t/ns/x" or "x" (public/default) -> "/admin/v2/persistent/t/ns/x" + suffix.
common::Result<std::string> topic_path(const std::string& topic, const std::string& suffix = "");

// "30s", "10m", "2h", "3d", "1w", bare seconds, or -1 -> seconds (-1 stays).
common::Result<int64_t> parse_duration_seconds(const std::string& s);
// "4096", "10k", "10M", "16G", "3T" bytes, or -1 -> bytes (-1 stays).
common::Result<int64_t> parse_size_bytes(const std::string& s);

void print_json_human(const Json& j);
std::string human_value(const Json& v);

void add_tenant_commands(CLI::App& admin, Command& run, std::shared_ptr<AdminOptions> options);
void add_cluster_commands(CLI::App& admin, Command& run, std::shared_ptr<AdminOptions> options);
void add_trial_commands(CLI::App& admin, Command& run, std::shared_ptr<AdminOptions> options);
void add_scram_user_commands(CLI::App& admin, Command& run, std::shared_ptr<AdminOptions> options);
void add_namespace_commands(CLI::App& admin, Command& run, std::shared_ptr<AdminOptions> options);
void add_topic_commands(CLI::App& admin, Command& run, std::shared_ptr<AdminOptions> options);
// The topic verbs that need the broker (admin_topic_verbs.cc), added to `topics`.
void add_topic_broker_verbs(CLI::App& topics, Command& run, std::shared_ptr<AdminOptions> options);

}  // namespace magnetar::cli
