#include <cctype>
#include <cstdint>

#include <CLI/CLI.hpp>

#include "cli/admin_cli.h"
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

// Takes "30s", "10m", "24h", "7d" or bare seconds and hands CLI11 the seconds.
CLI::Validator duration_seconds() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        auto seconds = parse_duration_seconds(value);
        if (!seconds.is_ok()) return seconds.status().message();
        if (*seconds <= 0) return "a duration must be positive";
        value = std::to_string(*seconds);
        return std::string();
      },
      "DURATION");
}

// Takes "4096", "64k", "10M", "1G" and hands CLI11 the bytes.
CLI::Validator size_bytes() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        auto bytes = parse_size_bytes(value);
        if (!bytes.is_ok()) return bytes.status().message();
        value = std::to_string(*bytes);
        return std::string();
      },
      "SIZE");
}

void add_trial_flags(CLI::App& cmd, server::Config& c) {
  const std::string group = "Free-trial mode";
  auto opt = [&](const std::string& name, auto& field, const std::string& help) {
    return cmd.add_option(name, field, help)->group(group)->capture_default_str();
  };
  cmd.add_flag("--trial", c.trial,
               "Free-trial mode: authentication and authorization on, visitors sign up on the web console for a "
               "tenant of their own that expires")
      ->group(group);
  cmd.add_option("--trial-invite-code", c.trial_invite_codes,
                 "Sign-up needs one of these codes (repeat the flag or separate with commas; default: open to all)")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->group(group);
  cmd.add_option("--trial-invite-codes-file", c.trial_invite_codes_file,
                 "Sign-up needs one of the codes in this file (one a line, # comments)")
      ->group(group);
  opt("--trial-expiry", c.trial_expiry_secs, "How long a trial lasts before its tenant and data are deleted (30s, 2h, 7d)")
      ->transform(duration_seconds())->type_name("DURATION");
  opt("--trial-max-trials", c.trial_max_trials, "Trials running at once; sign-ups past it are refused (503)")
      ->check(CLI::Range(1u, 1'000'000u));
  opt("--trial-signups-per-address", c.trial_signups_per_address,
      "Sign-ups one client address may make per --trial-signup-window (429 past it; 0: no limit)");
  opt("--trial-signups-total", c.trial_signups_total,
      "Sign-ups all client addresses together may make per --trial-signup-window (0: no limit)");
  opt("--trial-signup-window", c.trial_signup_window_secs, "The window of the sign-up limits (10m, 1h, 1d)")
      ->transform(duration_seconds())->type_name("DURATION");
  opt("--trial-max-topics", c.trial_max_topics, "Topics a trial tenant may have (partitions count)")
      ->check(CLI::Range(1, 100000));
  opt("--trial-storage-quota", c.trial_storage_quota_bytes, "Bytes a trial tenant may store (64M, 1G)")
      ->transform(size_bytes())->type_name("SIZE");
  opt("--trial-publish-rate-msgs", c.trial_publish_rate_msgs, "Messages per second a trial tenant may publish (-1: no limit)")
      ->check(CLI::Range(int64_t{-1}, INT64_MAX / 2));
  opt("--trial-publish-rate-bytes", c.trial_publish_rate_bytes, "Bytes per second a trial tenant may publish (1M; -1: no limit)")
      ->transform(size_bytes())->type_name("SIZE");
  opt("--trial-dispatch-rate-msgs", c.trial_dispatch_rate_msgs, "Messages per second a trial tenant's consumers receive (-1: no limit)")
      ->check(CLI::Range(int64_t{-1}, INT64_MAX / 2));
  opt("--trial-dispatch-rate-bytes", c.trial_dispatch_rate_bytes, "Bytes per second a trial tenant's consumers receive (2M; -1: no limit)")
      ->transform(size_bytes())->type_name("SIZE");
  opt("--trial-max-connections", c.trial_max_connections, "Client connections a trial tenant may have, every protocol")
      ->check(CLI::Range(1, 100000));
  opt("--trial-max-producers", c.trial_max_producers, "Producers a trial tenant may have")->check(CLI::Range(1, 100000));
  opt("--trial-max-consumers", c.trial_max_consumers, "Consumers a trial tenant may have")->check(CLI::Range(1, 100000));
  opt("--trial-max-subscriptions", c.trial_max_subscriptions, "Subscriptions a trial tenant may have")
      ->check(CLI::Range(1, 1000000));
  opt("--trial-max-message-size", c.trial_max_message_bytes, "Largest message a trial tenant may publish (256k, 1M)")
      ->transform(size_bytes())->type_name("SIZE");
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
  auto place_name = [](const std::string& what) {
    return [what](const std::string& name) -> std::string {
      if (name.empty() || name.size() > 64) return "a " + what + " name has 1 to 64 characters";
      for (char ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') {
          return "a " + what + " name has letters, digits, '-', '_' and '.' only";
        }
      }
      return "";
    };
  };
  cmd.add_option("--zone", c.zone,
                 "In a cluster: the zone (rack, availability zone) this node is in; a ledger's copies spread across "
                 "zones")
      ->check(place_name("zone"));
  cmd.add_option("--storage-group", c.storage_group,
                 "In a cluster: the storage group this node's storage belongs to; a namespace's bookie affinity "
                 "group keeps its ledgers' copies on its groups' nodes")
      ->check(place_name("storage group"));
  cmd.add_option("--failover-after-secs", c.failover_after_secs,
                 "In a cluster: how long after a broker is counted dead (about 5 s of silence) its topics move to "
                 "live brokers (0: at once)")
      ->capture_default_str()->check(CLI::Range(0, 86400));
  cmd.add_option("--load-balancer-shed-secs", c.load_balancer_shed_secs,
                 "In a cluster: how often a bundle moves from the busiest broker (message rate, then bundle count) "
                 "to a less busy one (0: never)")
      ->capture_default_str()->check(CLI::Range(0, 86400));
  cmd.add_option("--load-balancer-auto-split", c.load_balancer_auto_split,
                 "In a cluster: split a bundle in halves when it goes over one of the --bundle-split-max-* limits")
      ->capture_default_str();
  cmd.add_option("--bundle-split-max-topics", c.bundle_split_max_topics,
                 "Split a bundle with more topics than this (0: no limit)")
      ->capture_default_str();
  cmd.add_option("--bundle-split-max-sessions", c.bundle_split_max_sessions,
                 "Split a bundle with more producers and consumers than this (0: no limit)")
      ->capture_default_str();
  cmd.add_option("--bundle-split-max-msg-rate", c.bundle_split_max_msg_rate,
                 "Split a bundle carrying more messages a second, in and out, than this (0: no limit)")
      ->capture_default_str();
  cmd.add_option("--bundle-split-max-mbytes", c.bundle_split_max_mbytes,
                 "Split a bundle carrying more MiB a second, in and out, than this (0: no limit)")
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
  cmd.add_option("--stall-probe-ms", c.stall_probe_ms,
                 "Wake a probe thread this often to measure how late the node's threads run, split into waiting "
                 "for a core and the machine not running them (magnetar_node_stall_seconds; 0: off)")
      ->capture_default_str()->check(CLI::Range(0, 1000));
  cmd.add_option("--compaction-max-read-mib-per-sec", c.compaction_max_read_mib_per_sec,
                 "Topic compaction reads at most this many MiB a second per pass (0: no limit)")
      ->capture_default_str()->check(CLI::Range(0, 100000));
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
  cmd.add_option("--storage-heal-grace-secs", c.storage_heal_grace_secs,
                 "In a cluster: how long a storage node may be gone before the copies it held are made again on "
                 "other members (0: never)")
      ->capture_default_str()->check(CLI::Range(0, 86400 * 7));
  cmd.add_option("--storage-heal-rate-mb", c.storage_heal_rate_mb,
                 "In a cluster: the most MiB per second self-healing and decommissioning copy (0: no limit)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
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
  cmd.add_option("--max-connections-per-address", c.max_connections_per_address,
                 "Connections each listener admits from one client address (0: no limit; default: none, 64 with --trial)")
      ->check(CLI::Range(0, 1'000'000));
  cmd.add_option("--http-request-timeout-secs", c.http_request_timeout_secs,
                 "An HTTP request must arrive whole within this long of its first byte (else 408 and closed)")
      ->capture_default_str()->check(CLI::Range(1, 3600));
  cmd.add_option("--http-idle-timeout-secs", c.http_idle_timeout_secs,
                 "Close an HTTP connection with no request under way after this long")
      ->capture_default_str()->check(CLI::Range(1, 86400));
  add_trial_flags(cmd, c);
  cmd.add_option("--reactors", c.reactors, "Event-loop threads (0: one per core)")->capture_default_str();
  cmd.add_option("--log-level", c.log_level, "trace, debug, info, warn, error, critical or off")
      ->capture_default_str()
      ->transform(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}, CLI::ignore_case));
}

}  // namespace magnetar::cli
