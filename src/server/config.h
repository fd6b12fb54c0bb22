// Config: every setting of a Magnetar node. Each field is a command-line flag
// and may come from a TOML config file (--config); see cli/flags.cc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace magnetar::server {

struct Config {
  std::string data_dir = "./data";
  // Where the bound ports are written besides <data_dir>/ports.json, as the
  // same JSON object; empty: nowhere else. Removed again when the node stops.
  std::string ports_file;
  // The data directory is private to this process and removed when it
  // stops (magnetar start --ephemeral, cli/ephemeral.h): nothing needs to
  // survive a crash, so nothing is synced, whatever `fsync` says: neither the
  // log nor the metadata store nor LevelDB's own files (server/unsynced_files.h).
  bool ephemeral = false;
  std::string bind = "127.0.0.1";
  // Host handed to clients in lookups and metadata. Empty: the bind address,
  // or this machine's host name when binding to a wildcard address.
  std::string advertised_address;
  // Listener ports: 0 picks a free port, kPortOff turns the listener off
  // (flag value "off"). TLS listeners are off unless given a port.
  static constexpr int32_t kPortOff = -1;
  int32_t pulsar_port = 6650;
  int32_t http_port = 8080;
  int32_t kafka_port = 9092;
  int32_t amqp_port = 5672;
  int32_t broker_service_port_tls = kPortOff;  // pulsar+ssl, Pulsar's usual 6651
  int32_t web_service_port_tls = kPortOff;     // https, Pulsar's usual 8443
  int32_t kafka_port_tls = kPortOff;           // Kafka over TLS, e.g. 9093
  int32_t amqp_port_tls = kPortOff;            // amqps, usually 5671
  // TLS (runtime/tls_context.h): one certificate for every TLS listener,
  // reloaded when the files change (checked every
  // tls_cert_refresh_check_secs, and on SIGHUP).
  std::string tls_certificate_file;
  std::string tls_key_file;
  std::string tls_trust_certs_file_path;  // CAs for client certificates
  bool tls_require_trusted_client_cert_on_connect = false;
  uint32_t tls_cert_refresh_check_secs = 60;
  std::string cluster_name = "standalone";
  // Cluster membership (cluster/node.h). Without a cluster port the node is
  // standalone. The first node of a cluster starts without `join`; later
  // nodes name one or more members (host:port of their cluster ports) once,
  // at their first start. Every member reads the same secret file.
  int32_t cluster_port = kPortOff;
  std::vector<std::string> join;
  std::string cluster_secret_file;
  // broker: serves clients (Pulsar, Kafka, AMQP) and owns bundles; storage:
  // keeps ledger copies. A cluster member has either or both.
  std::vector<std::string> roles = {"broker", "storage"};
  bool has_role(std::string_view role) const {
    for (const auto& r : roles) {
      if (r == role) return true;
    }
    return false;
  }
  // The zone (rack, availability zone) a cluster member is in: ledger copies
  // spread across zones. Empty: none declared.
  std::string zone;
  // The storage group a cluster member's storage belongs to: a namespace's
  // bookie affinity group puts its ledgers' copies on the members of those
  // groups only. Empty: none.
  std::string storage_group;
  // How long after the membership counts a broker dead (about 5 s of
  // silence) its bundles move to live brokers; 0: at once.
  uint32_t failover_after_secs = 0;
  // How often the lowest live broker moves a bundle to even out the load
  // (server/load_manager.h); 0: never.
  uint32_t load_balancer_shed_secs = 10;
  // Whether the load manager splits a bundle over one of these limits (0:
  // none of that kind), Pulsar's loadBalancerNamespaceBundleMax* defaults.
  bool load_balancer_auto_split = true;
  uint32_t bundle_split_max_topics = 1000;
  uint32_t bundle_split_max_sessions = 1000;
  uint32_t bundle_split_max_msg_rate = 30000;  // msg/s in + out
  uint32_t bundle_split_max_mbytes = 100;      // MiB/s in + out
  // When an add is acknowledged: "always" (after fdatasync of its group
  // commit), "interval" (after write; fdatasync every fsync_interval_ms) or
  // "never" (after write; the OS flushes when it likes).
  std::string fsync = "always";
  uint32_t fsync_interval_ms = 100;
  // A sealed storage segment whose live records fill less than this
  // fraction of it has them copied forward and is removed (0: never).
  double segment_compact_ratio = 0.5;
  uint32_t reactors = 0;  // 0: one per core
  // Pulsar connections idle this long get a PING; closed when no answer
  // comes within as long again. 0: off.
  uint32_t keepalive_secs = 30;
  std::string log_level = "info";
  // How often each reactor runs topic housekeeping: rollover by age,
  // retention, message TTL.
  uint32_t housekeeping_secs = 60;
  // How often the stall probe wakes to measure how late this node's
  // threads run (server/stall_probe.h). 0: no probe.
  uint32_t stall_probe_ms = 10;
  // A persistent topic with nothing attached and unused this long leaves
  // memory at the next housekeeping run; its next use loads it again.
  // 0: topics stay loaded.
  uint32_t topic_idle_unload_secs = 300;
  // Topic compaction reads at most this many MiB a second per pass (0: no
  // limit), so that producers keep the node's disk and cores.
  uint32_t compaction_max_read_mib_per_sec = 32;
  // Retention of topics made through Kafka when neither the topic nor its
  // namespace sets one (broker/retention.h). -1: no limit.
  static constexpr int64_t kKafkaDefaultRetentionMs = 7LL * 24 * 3600 * 1000;
  int64_t kafka_default_retention_ms = kKafkaDefaultRetentionMs;
  int64_t kafka_default_retention_bytes = -1;
  // A topic's ledger is closed and a new one started after this many
  // entries (Pulsar's managedLedgerMaxEntriesPerLedger); retention deletes
  // whole closed ledgers.
  uint32_t managed_ledger_max_entries_per_ledger = 50000;
  // How often tenants' stored bytes are summed against their storage
  // quotas (only tenants that have one).
  uint32_t storage_quota_check_secs = 30;
  // How often storage ledgers that no topic names (left by a crash) are
  // looked for and deleted, after the pass at start (0: at start only).
  uint32_t ledger_reconcile_secs = 600;
  // A cluster member whose storage is gone this long has its ledgers'
  // copies made again on other members (0: never).
  uint32_t storage_heal_grace_secs = 60;
  // The most MiB per second self-healing and decommissioning copy (0: no limit).
  uint32_t storage_heal_rate_mb = 100;
  // Token authentication (security/token_authenticator.h): when on, every
  // listener refuses clients without a valid token. The key verifies the
  // tokens: a secret key (HS256) or a public key (RS256/ES256), given as
  // file:///path or data:;base64,<key>.
  bool authentication_enabled = false;
  std::string token_secret_key;
  std::string token_public_key;
  // Authorization (security/authorizer.h): roles may do only what they are
  // granted; superuser roles may do everything. Needs authentication.
  bool authorization_enabled = false;
  std::vector<std::string> superuser_roles;

  // Free-trial mode (trial/trial_service.h): authentication and
  // authorization are on whatever the flags say, and visitors sign up on
  // the console for a tenant of their own with the limits below, which is
  // deleted with all its data `trial_expiry_secs` after sign-up. Without a
  // token key the node makes one, <data_dir>/trial-token.key, and keeps it.
  bool trial = false;
  std::vector<std::string> trial_invite_codes;  // empty (and no file): anyone may sign up
  std::string trial_invite_codes_file;          // one code a line
  int64_t trial_expiry_secs = 24 * 3600;
  uint32_t trial_max_trials = 1000;             // live trial tenants at once
  uint32_t trial_signups_per_address = 5;       // per window, from one client address
  uint32_t trial_signups_total = 200;           // per window, from all of them
  int64_t trial_signup_window_secs = 3600;
  int32_t trial_max_topics = 10;
  int64_t trial_storage_quota_bytes = 64LL << 20;
  int64_t trial_publish_rate_msgs = 200;
  int64_t trial_publish_rate_bytes = 1LL << 20;
  int64_t trial_dispatch_rate_msgs = 400;
  int64_t trial_dispatch_rate_bytes = 2LL << 20;
  int32_t trial_max_connections = 10;
  int32_t trial_max_producers = 20;
  int32_t trial_max_consumers = 20;
  int32_t trial_max_subscriptions = 20;
  int64_t trial_max_message_bytes = 1LL << 20;
  // Each listener admits at most this many connections from one client
  // address at a time. -1: no limit, or kTrialConnectionsPerAddress in trial
  // mode; 0: no limit.
  static constexpr int32_t kTrialConnectionsPerAddress = 64;
  int32_t max_connections_per_address = -1;
  // HTTP: a request must arrive whole within this long of its first byte;
  // a connection with nothing under way is closed after the idle time.
  uint32_t http_request_timeout_secs = 30;
  uint32_t http_idle_timeout_secs = 120;

  // Whether any TLS listener is on.
  bool tls_enabled() const {
    return broker_service_port_tls != kPortOff || web_service_port_tls != kPortOff ||
           kafka_port_tls != kPortOff || amqp_port_tls != kPortOff;
  }

  bool clustered() const { return cluster_port != kPortOff; }

  // The address clients should use to reach this node.
  std::string effective_advertised_address() const;
};

}  // namespace magnetar::server
