#include <cstdint>

#include "cli/commands.h"

namespace magnetar::cli {
namespace {

// A listener's port: a number (0 picks a free one) or "off".
CLI::Option* add_port_option(CLI::App& cmd, const std::string& name, int32_t& port, const std::string& help) {
  return cmd.add_option(name, port, help)
      ->transform(CLI::Transformer({{"off", std::to_string(server::Config::kPortOff)}}))
      ->check(CLI::Range(server::Config::kPortOff, 65535))
      ->type_name("PORT|off");
}

}  // namespace

void add_server_flags(CLI::App& cmd, server::Config& c) {
  // A flag given twice keeps the last value: settings from --config are
  // placed before the command line's own flags, which therefore win.
  cmd.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd.add_option("--config", "Read settings from a TOML file; keys are flag names (data-dir = \"/var/lib/magnetar\"); flags on the command line win");
  cmd.add_option("--data-dir", c.data_dir, "Where data, metadata and ports.json live")->capture_default_str();
  cmd.add_option("--ports-file", c.ports_file,
                 "Also write the bound ports to this file, as ports.json holds them (removed when the node stops)");
  cmd.add_option("--bind", c.bind, "Address every listener binds to (0.0.0.0 for all interfaces)")->capture_default_str();
  cmd.add_option("--advertised-address", c.advertised_address,
                 "Host name or address handed to clients in lookups and metadata (default: the bind address, or the host name when binding to all interfaces)");
  add_port_option(cmd, "--http-port", c.http_port,
                  "REST admin API, /metrics and web console (0 picks a free port, off: none)")
      ->capture_default_str();
  add_port_option(cmd, "--pulsar-port", c.pulsar_port, "Pulsar binary protocol (0 picks a free port, off: none)")
      ->capture_default_str();
  add_port_option(cmd, "--kafka-port", c.kafka_port, "Kafka protocol (0 picks a free port, off: none)")
      ->capture_default_str();
  add_port_option(cmd, "--amqp-port", c.amqp_port, "AMQP 0-9-1 (0 picks a free port, off: none)")
      ->capture_default_str();
  add_port_option(cmd, "--broker-service-port-tls", c.broker_service_port_tls,
                  "Pulsar binary protocol over TLS, pulsar+ssl:// (e.g. 6651; default off)");
  add_port_option(cmd, "--web-service-port-tls", c.web_service_port_tls,
                  "REST admin API, /metrics and web console over HTTPS (e.g. 8443; default off)");
  add_port_option(cmd, "--kafka-port-tls", c.kafka_port_tls, "Kafka protocol over TLS (e.g. 9093; default off)");
  add_port_option(cmd, "--amqp-port-tls", c.amqp_port_tls, "AMQP 0-9-1 over TLS, amqps:// (e.g. 5671; default off)");
  cmd.add_option("--tls-certificate-file", c.tls_certificate_file,
                 "PEM certificate (then its chain) every TLS listener presents");
  cmd.add_option("--tls-key-file", c.tls_key_file, "PEM private key of --tls-certificate-file");
  cmd.add_option("--tls-trust-certs-file-path", c.tls_trust_certs_file_path,
                 "PEM CA certificates that client certificates must chain to");
  cmd.add_flag("--tls-require-trusted-client-cert-on-connect", c.tls_require_trusted_client_cert_on_connect,
               "Refuse TLS clients without a certificate signed by --tls-trust-certs-file-path (mutual TLS)");
  cmd.add_option("--tls-cert-refresh-check-duration-sec", c.tls_cert_refresh_check_secs,
                 "How often the TLS files are checked for changes and reloaded (SIGHUP reloads at once)")
      ->capture_default_str()->check(CLI::Range(1, 86400));
  cmd.add_option("--cluster-name", c.cluster_name, "Name of the cluster this node belongs to")->capture_default_str();
  add_port_option(cmd, "--cluster-port", c.cluster_port,
                  "Port other members reach this node on; given, the node is a cluster member (off: standalone)")
      ->capture_default_str();
  cmd.add_option("--join", c.join,
                 "Members to join through (host:port of their cluster ports), at a node's first start only")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--cluster-secret-file", c.cluster_secret_file,
                 "The secret every member holds (magnetar cluster create-secret --output FILE)");
  cmd.add_option("--roles", c.roles, "What this node does: broker, storage (comma-separated)")
      ->delimiter(',')
      ->check(CLI::IsMember({"broker", "storage"}))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->capture_default_str();
  cmd.add_option("--fsync", c.fsync,
                 "When a write is acknowledged: always (after fdatasync), interval (fdatasync every --fsync-interval-ms), never")
      ->capture_default_str()
      ->transform(CLI::IsMember({"always", "interval", "never"}, CLI::ignore_case));
  cmd.add_option("--fsync-interval-ms", c.fsync_interval_ms, "fdatasync period with --fsync interval")
      ->capture_default_str()->check(CLI::Range(1, 60000));
  cmd.add_option("--segment-compact-ratio", c.segment_compact_ratio,
                 "Copy the live records out of a sealed storage segment, and remove it, once they fill less than "
                 "this fraction of it (0: never)")
      ->capture_default_str()->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--keepalive-secs", c.keepalive_secs,
                 "PING a Pulsar connection idle this long; close it when no answer comes within as long again (0: off)")
      ->capture_default_str()->check(CLI::Range(0, 3600));
  cmd.add_option("--housekeeping-secs", c.housekeeping_secs,
                 "How often topics roll ledgers over by age, apply retention and expire messages past their TTL")
      ->capture_default_str()->check(CLI::Range(1, 3600));
  cmd.add_option("--topic-idle-unload-secs", c.topic_idle_unload_secs,
                 "Unload a persistent topic with no producer or consumer unused this long (it loads again on use; "
                 "0: never)")
      ->capture_default_str()->check(CLI::Range(0, 86400 * 365));
  cmd.add_option("--kafka-default-retention-ms", c.kafka_default_retention_ms,
                 "How long topics made through Kafka keep data when neither the topic nor its namespace sets a "
                 "retention (Kafka's retention.ms; -1: forever)")
      ->capture_default_str()->check(CLI::Range(int64_t{-1}, INT64_MAX / 2));
  cmd.add_option("--kafka-default-retention-bytes", c.kafka_default_retention_bytes,
                 "How much each topic made through Kafka keeps when neither the topic nor its namespace sets a "
                 "retention (Kafka's retention.bytes; -1: no limit)")
      ->capture_default_str()->check(CLI::Range(int64_t{-1}, INT64_MAX / 2));
  cmd.add_option("--managed-ledger-max-entries-per-ledger", c.managed_ledger_max_entries_per_ledger,
                 "Entries after which a topic's ledger is closed and a new one started (retention deletes whole "
                 "closed ledgers)")
      ->capture_default_str()->check(CLI::Range(10u, 10'000'000u));
  cmd.add_option("--storage-quota-check-secs", c.storage_quota_check_secs,
                 "How often tenants with a storage quota have their stored bytes summed (publishing is refused while "
                 "at or over it)")
      ->capture_default_str()->check(CLI::Range(1, 3600));
  cmd.add_option("--ledger-reconcile-secs", c.ledger_reconcile_secs,
                 "How often storage ledgers that no topic names (left by a crash) are looked for and deleted, after "
                 "the pass at start (0: at start only)")
      ->capture_default_str()->check(CLI::Range(0, 86400 * 7));
  cmd.add_flag("--authentication-enabled", c.authentication_enabled,
               "Refuse clients without a valid token on every listener (needs --token-secret-key or --token-public-key)");
  cmd.add_option("--token-secret-key", c.token_secret_key,
                 "HS256 secret key that signs tokens: file:///path or data:;base64,<key> (magnetar tokens create-secret-key)");
  cmd.add_option("--token-public-key", c.token_public_key,
                 "RS256/ES256 public key that verifies tokens: file:///path or data:;base64,<key> (magnetar tokens create-key-pair)");
  cmd.add_flag("--authorization-enabled", c.authorization_enabled,
               "Let roles do only what they are granted (tenant admins, namespace permissions); needs authentication");
  cmd.add_option("--superuser-roles", c.superuser_roles, "Roles that may do everything, comma-separated")
      ->delimiter(',');
  cmd.add_option("--reactors", c.reactors, "Event-loop threads (0: one per core)")->capture_default_str();
  cmd.add_option("--log-level", c.log_level, "trace, debug, info, warn, error, critical or off")
      ->capture_default_str()
      ->transform(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}, CLI::ignore_case));
}

}  // namespace magnetar::cli
