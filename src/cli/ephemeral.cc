#include "cli/ephemeral.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace magnetar::cli {
namespace {

// An ephemeral node's client URLs; a listener that is off has none.
struct EphemeralUrls {
  std::string pulsar;
  std::string http;
  std::string kafka;
  std::string amqp;
};

EphemeralUrls urls_of(const server::Server& node) {
  const std::string host = node.config().effective_advertised_address();
  const server::BoundPorts& ports = node.ports();
  EphemeralUrls urls;
  if (ports.pulsar != 0) urls.pulsar = fmt::format("pulsar://{}:{}", host, ports.pulsar);
  if (ports.http != 0) urls.http = fmt::format("http://{}:{}", host, ports.http);
  if (ports.kafka != 0) urls.kafka = fmt::format("{}:{}", host, ports.kafka);
  if (ports.amqp != 0) urls.amqp = fmt::format("amqp://{}:{}", host, ports.amqp);
  return urls;
}

std::string shell_word(const std::string& value) {
  const bool plain = !value.empty() && value.find_first_not_of(
                                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                           "_./:@%+,=-") == std::string::npos;
  if (plain) return value;
  std::string quoted = "'";
  for (char c : value) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

void add_ephemeral_flags(CLI::App& cmd, EphemeralOptions& options) {
  cmd.add_flag("--ephemeral", options.enabled,
               "A throwaway node for tests: data in a private directory under $TMPDIR that is removed when it stops "
               "(and, if it was killed, by the next ephemeral start), every listener on a free port unless given, "
               "nothing ever synced to disk (nothing is meant to survive), --log-level warn; once ready it prints "
               "one JSON line on stdout: pid, dataDir, readyMs, ports, pulsarUrl, httpUrl, kafkaBootstrap, amqpUrl. "
               "Not with --data-dir, --cluster-port or --fsync");
  cmd.add_flag("--print-env", options.print_env,
               "With --ephemeral: once ready, print PULSAR_URL, PULSAR_HTTP_URL, KAFKA_BOOTSTRAP, AMQP_URL, "
               "MAGNETAR_PID and MAGNETAR_DATA_DIR as KEY=value lines instead of the JSON line and return, "
               "leaving the node running in the background (kill $MAGNETAR_PID stops it)");
}

void apply_ephemeral_settings(const CLI::App& cmd, const EphemeralOptions& options, server::Config& config) {
  if (!options.enabled) {
    if (options.print_env) throw CLI::ValidationError("--print-env needs --ephemeral");
    return;
  }
  for (const char* flag : {"--data-dir", "--cluster-port", "--join", "--cluster-secret-file"}) {
    if (cmd.count(flag) == 0) continue;
    throw CLI::ValidationError(fmt::format(
        "--ephemeral cannot be used with {}: an ephemeral node is a standalone node whose data lives in a "
        "private temporary directory that is removed when it stops",
        flag));
  }
  for (const char* flag : {"--fsync", "--fsync-interval-ms"}) {
    if (cmd.count(flag) == 0) continue;
    throw CLI::ValidationError(fmt::format(
        "--ephemeral cannot be used with {}: an ephemeral node never syncs, its data is removed when it stops",
        flag));
  }
  config.ephemeral = true;
  for (auto [flag, port] : {std::pair{"--http-port", &config.http_port},
                            std::pair{"--pulsar-port", &config.pulsar_port},
                            std::pair{"--kafka-port", &config.kafka_port},
                            std::pair{"--amqp-port", &config.amqp_port}}) {
    if (cmd.count(flag) == 0) *port = 0;
  }
  config.fsync = "never";
  if (cmd.count("--log-level") == 0) config.log_level = "warn";
}

std::string ready_json_line(const server::Server& node, double ready_ms) {
  EphemeralUrls urls = urls_of(node);
  nlohmann::ordered_json line = {{"pid", ::getpid()},
                         {"dataDir", node.config().data_dir},
                         {"readyMs", static_cast<double>(static_cast<int64_t>(ready_ms * 10)) / 10},
                         {"ports", node.ports_json()}};
  for (auto [key, url] : {std::pair{"pulsarUrl", &urls.pulsar}, std::pair{"httpUrl", &urls.http},
                          std::pair{"kafkaBootstrap", &urls.kafka}, std::pair{"amqpUrl", &urls.amqp}}) {
    if (!url->empty()) line[key] = *url;
  }
  return line.dump() + "\n";
}

std::string ready_env_lines(const server::Server& node) {
  EphemeralUrls urls = urls_of(node);
  std::string out;
  for (auto [key, url] : {std::pair{"PULSAR_URL", &urls.pulsar}, std::pair{"PULSAR_HTTP_URL", &urls.http},
                          std::pair{"KAFKA_BOOTSTRAP", &urls.kafka}, std::pair{"AMQP_URL", &urls.amqp}}) {
    if (!url->empty()) out += fmt::format("{}={}\n", key, shell_word(*url));
  }
  out += fmt::format("MAGNETAR_PID={}\n", ::getpid());
  out += fmt::format("MAGNETAR_DATA_DIR={}\n", shell_word(node.config().data_dir));
  return out;
}

}  // namespace magnetar::cli
