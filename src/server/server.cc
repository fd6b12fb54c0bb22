#include "server/server.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include <set>
#include <nlohmann/json.hpp>

#include "admin/admin_service.h"
#include "admin/handlers.h"
#include "broker/broker_service.h"
#include "broker/policy_cache.h"
#include "broker/schema_registry.h"
#include "broker/storage_quotas.h"
#include "ledger/ledger_reconciler.h"
#include "replication/replicated_storage.h"
#include "broker/tenancy.h"
#include "protocol/amqp/server/amqp_service.h"
#include "protocol/kafka/server/kafka_service.h"
#include "protocol/pulsar/server/pulsar_service.h"
#include "protocol/pulsar/server/compaction_codec.h"
#include "protocol/pulsar/server/trace_describer.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "admin/handlers.h"
#include "broker/bundle_layout.h"
#include "broker/bundle_ownership.h"
#include "cluster/node.h"
#include "georep/geo_replication.h"
#include "metadata/blocking.h"
#include "metadata/leveldb_store.h"
#include "server/allocator.h"
#include "server/load_manager.h"
#include "server/mount_check.h"
#include "server/process_metrics.h"
#include "server/storage_node.h"
#include "server/unsynced_files.h"
#include "storage/storage.h"
#include "trial/trial_routes.h"
#include "trial/trial_service.h"

#ifndef MAGNETAR_VERSION
#define MAGNETAR_VERSION "0.0.0-dev"
#endif

namespace magnetar::server {

using common::Status;

const char* version() { return MAGNETAR_VERSION; }

Server::Server(Config config) : config_(std::move(config)) {}

Server::~Server() { stop(); }

Status Server::prepare_data_dir() {
  std::error_code ec;
  std::filesystem::create_directories(config_.data_dir, ec);
  if (ec) {
    return Status::io_error(fmt::format("cannot create data directory '{}': {}", config_.data_dir, ec.message()));
  }
  std::string lock_path = config_.data_dir + "/LOCK";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) return Status::from_errno(errno, "cannot open " + lock_path);
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
    return Status::failed_precondition(fmt::format(
        "data directory '{}' is in use by another magnetar process (choose another --data-dir)",
        config_.data_dir));
  }
  return Status::ok();
}

nlohmann::json Server::ports_json() const {
  nlohmann::json ports = {{"http", ports_.http}, {"pulsar", ports_.pulsar}, {"kafka", ports_.kafka}, {"amqp", ports_.amqp}};
  // TLS listeners appear only when on.
  for (auto [name, port] : {std::pair{"http_tls", ports_.http_tls}, std::pair{"pulsar_tls", ports_.pulsar_tls},
                            std::pair{"kafka_tls", ports_.kafka_tls}, std::pair{"amqp_tls", ports_.amqp_tls},
                            std::pair{"cluster", ports_.cluster}}) {
    if (port != 0) ports[name] = port;
  }
  return ports;
}

namespace {

// Replaces `path` with `text` at once (write beside it, then rename), so a
// reader never sees half a file.
Status replace_file(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) return Status::io_error("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return Status::from_errno(errno, "rename " + tmp);
  return Status::ok();
}

}  // namespace

Status Server::write_ports_file() {
  std::string text = ports_json().dump() + "\n";
  MAGNETAR_RETURN_IF_ERROR(replace_file(config_.data_dir + "/ports.json", text));
  if (config_.ports_file.empty()) return Status::ok();
  MAGNETAR_RETURN_IF_ERROR(replace_file(config_.ports_file, text));
  wrote_ports_file_ = true;
  return Status::ok();
}

// The token authenticator, when authentication is on: one key, read now so
// a bad key stops the start with a clear error.
Status Server::prepare_authentication() {
  const bool secret = !config_.token_secret_key.empty();
  const bool pub = !config_.token_public_key.empty();
  if (!config_.authentication_enabled) {
    if (config_.authorization_enabled) {
      return Status::invalid_argument("--authorization-enabled needs --authentication-enabled (roles come from tokens)");
    }
    if (secret || pub) MLOG_WARN("a token key is set but --authentication-enabled is not: clients are not checked");
    return Status::ok();
  }
  if (secret == pub) {
    return Status::invalid_argument(
        "--authentication-enabled needs exactly one of --token-secret-key and --token-public-key");
  }
  auto bytes = security::TokenKey::read_key_bytes(secret ? config_.token_secret_key : config_.token_public_key);
  security::JwtAlgorithm algorithm = security::JwtAlgorithm::kHS256;
  if (!bytes.is_ok()) return bytes.status();
  if (secret) {
    if (bytes->size() < 32) return Status::invalid_argument("the token secret key is shorter than 256 bits");
    authenticator_ = std::make_unique<security::TokenAuthenticator>(security::TokenKey::secret(std::move(*bytes)));
  } else {
    auto key = security::TokenKey::public_key(*bytes);
    if (!key.is_ok()) return Status::invalid_argument("--token-public-key: " + key.status().message());
    algorithm = key->algorithm();
    authenticator_ = std::make_unique<security::TokenAuthenticator>(std::move(*key));
  }
  MLOG_INFO("authentication: {} tokens required on every listener", security::algorithm_name(algorithm));
  return Status::ok();
}

Status Server::prepare_trial() {
  if (!config_.trial) return Status::ok();
  config_.authentication_enabled = true;
  config_.authorization_enabled = true;
  if (config_.max_connections_per_address < 0) {
    config_.max_connections_per_address = Config::kTrialConnectionsPerAddress;
  }
  if (!config_.token_public_key.empty() && config_.token_secret_key.empty()) {
    return Status::invalid_argument(
        "--trial signs visitors' tokens: it needs --token-secret-key (or no key: one is made in the data directory)");
  }
  if (config_.token_secret_key.empty()) {
    const std::string path = config_.data_dir + "/trial-token.key";
    if (!std::filesystem::exists(path)) {
      security::TokenKey key = security::TokenKey::generate_secret();
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd < 0) return Status::from_errno(errno, "cannot create " + path);
      const std::string& bytes = key.secret_bytes();
      const bool written = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
      const bool synced = ::fsync(fd) == 0;
      ::close(fd);
      if (!written || !synced) return Status::io_error("cannot write " + path);
      MLOG_INFO("trial: made the token key {} (sign operators' tokens with it)", path);
    }
    config_.token_secret_key = "file://" + std::filesystem::absolute(path).string();
  }
  if (!config_.trial_invite_codes_file.empty()) {
    std::ifstream in(config_.trial_invite_codes_file);
    if (!in) return Status::invalid_argument("cannot read --trial-invite-codes-file " + config_.trial_invite_codes_file);
    std::string line;
    while (std::getline(in, line)) {
      line.erase(0, line.find_first_not_of(" \t\r"));
      line.erase(line.find_last_not_of(" \t\r") + 1);
      if (!line.empty() && line[0] != '#') config_.trial_invite_codes.push_back(line);
    }
    if (config_.trial_invite_codes.empty()) {
      return Status::invalid_argument("--trial-invite-codes-file " + config_.trial_invite_codes_file +
                                      " holds no code (an empty list would let anyone in)");
    }
  }
  if (config_.superuser_roles.empty()) {
    MLOG_WARN("trial mode with no --superuser-roles: nobody can list, extend or delete trials");
  }
  return Status::ok();
}

// The TLS context every TLS listener shares, read now so a bad certificate
// stops the start with a clear error; then a thread that reloads it when
// its files change.
Status Server::prepare_tls() {
  const bool files = !config_.tls_certificate_file.empty() || !config_.tls_key_file.empty();
  if (!config_.tls_enabled()) {
    if (files) MLOG_WARN("a TLS certificate is set but no TLS port is: nothing is served over TLS");
    return Status::ok();
  }
  if (config_.tls_certificate_file.empty() || config_.tls_key_file.empty()) {
    return Status::invalid_argument("TLS listeners need --tls-certificate-file and --tls-key-file");
  }
  if (config_.tls_require_trusted_client_cert_on_connect && config_.tls_trust_certs_file_path.empty()) {
    return Status::invalid_argument(
        "--tls-require-trusted-client-cert-on-connect needs --tls-trust-certs-file-path");
  }
  runtime::TlsFiles tls_files{config_.tls_certificate_file, config_.tls_key_file, config_.tls_trust_certs_file_path,
                              config_.tls_require_trusted_client_cert_on_connect};
  auto source = runtime::TlsContextSource::create(std::move(tls_files));
  if (!source.is_ok()) return source.status();
  tls_ = std::move(*source);
  tls_watch_stop_ = false;
  tls_watcher_ = std::thread([this]() { watch_tls_files(); });
  return Status::ok();
}

void Server::watch_tls_files() {
  pthread_setname_np(pthread_self(), "tls-reload");
  const auto period = std::chrono::seconds(config_.tls_cert_refresh_check_secs);
  std::unique_lock lock(tls_watch_mu_);
  while (!tls_watch_cv_.wait_for(lock, period, [this]() { return tls_watch_stop_; })) {
    lock.unlock();
    (void)tls_->reload_if_changed();  // a failure is logged and keeps the old context
    lock.lock();
  }
}

void Server::reload_tls() {
  if (tls_) (void)tls_->reload_if_changed(/*force=*/true);
}

Status Server::start() {
  if (!config_.has_role("broker") && !config_.has_role("storage")) {
    return Status::invalid_argument("--roles needs broker, storage or both");
  }
  if (!config_.clustered() && !(config_.has_role("broker") && config_.has_role("storage"))) {
    return Status::invalid_argument("--roles applies to cluster members; a standalone node is broker and storage");
  }
  if (!config_.clustered() && !config_.zone.empty()) {
    return Status::invalid_argument("--zone applies to cluster members (--cluster-port)");
  }
  if (!config_.clustered() && !config_.storage_group.empty()) {
    return Status::invalid_argument("--storage-group applies to cluster members (--cluster-port)");
  }
  if (config_.trial) {
    // The trial's token key may live in the data directory: it comes first.
    MAGNETAR_RETURN_IF_ERROR(prepare_data_dir());
    Status st = prepare_trial();
    if (st.is_ok()) st = prepare_authentication();
    if (st.is_ok()) st = prepare_tls();
    if (!st.is_ok()) {
      stop();
      return st;
    }
  } else {
    MAGNETAR_RETURN_IF_ERROR(prepare_authentication());
    MAGNETAR_RETURN_IF_ERROR(prepare_tls());
    MAGNETAR_RETURN_IF_ERROR(prepare_data_dir());
  }
  tune_allocator();
  // An ephemeral node never syncs: its disk's trims cannot hold it up.
  if (!config_.ephemeral) warn_about_data_dir_mount(config_.data_dir);
  runtime_ = std::make_unique<runtime::Runtime>(config_.reactors);
  if (config_.max_connections_per_address > 0) {
    runtime_->set_max_connections_per_address(static_cast<uint32_t>(config_.max_connections_per_address));
  }
  runtime_->start();

  auto& registry = common::MetricsRegistry::global();
  collector_ids_ = register_process_metrics(registry, *runtime_, version());
  if (config_.stall_probe_ms > 0) {
    StallProbe::Options probe;
    probe.interval = std::chrono::milliseconds(config_.stall_probe_ms);
    probe.activity = [rt = runtime_.get()] {
      uint64_t iterations = 0;
      for (size_t i = 0; i < rt->size(); ++i) iterations += rt->reactor(i).loop_stats().busy().count();
      return iterations;
    };
    stall_probe_ = std::make_unique<StallProbe>(probe);
    stall_probe_->start();
  }

  std::string host = config_.effective_advertised_address();
  // Metadata first: tenancy reads and writes it, the admin API serves both.
  // A cluster member's store is replicated and must be reachable before
  // anything is built on it, so the member starts here.
  metadata::Store* store = nullptr;
  if (config_.clustered()) {
    cluster::ClusterNode::Options cluster_options;
    cluster_options.data_dir = config_.data_dir;
    cluster_options.bind = config_.bind;
    cluster_options.advertised_host = host;
    cluster_options.port = config_.cluster_port;
    cluster_options.join = config_.join;
    cluster_options.secret_file = config_.cluster_secret_file;
    auto node = std::make_unique<cluster::ClusterNode>(std::move(cluster_options));
    Status st = node->start();
    if (!st.is_ok()) {
      MLOG_ERROR("cluster failed to start: {}", st.to_string());
      stop();
      return st;
    }
    cluster_ = node.get();
    store = &node->store();
    components_.push_back(std::move(node));
    started_ = components_.size();
    auto broker_id = allocate_broker_id(*store, cluster_->id());
    if (!broker_id.is_ok()) {
      MLOG_ERROR("cannot get a broker id: {}", broker_id.status().to_string());
      stop();
      return broker_id.status();
    }
    broker_id_ = *broker_id;
    auto directory = std::make_unique<NodeDirectory>(*store, *cluster_);
    directory_ = directory.get();
    components_.push_back(std::move(directory));
    auto ownership = std::make_unique<broker::BundleOwnership>(
        *store, cluster_->id(), [this]() { return directory_->nodes(); },
        [this](uint64_t id, std::function<void()> done) { directory_->refresh(id, std::move(done)); });
    ownership->set_serves_topics(config_.has_role("broker"));
    ownership->set_lease([cluster = cluster_]() { return cluster->lease_valid(); });
    ownership->set_reactor(&cluster_->reactor());
    ownership->set_failover_after(std::chrono::seconds(config_.failover_after_secs));
    ownership->set_cluster(config_.cluster_name);
    ownership_ = ownership.get();
    remote_calls_ = std::make_unique<ClusterCalls>(*cluster_);
    ownership->set_remote_calls(remote_calls_.get());
    components_.push_back(std::move(ownership));
  } else {
    metadata::LevelDbStore::Options metadata_options{config_.data_dir + "/metadata"};
    if (config_.ephemeral) {
      metadata_options.sync_writes = false;
      metadata_options.env = unsynced_leveldb_env();
    }
    auto leveldb = std::make_unique<metadata::LevelDbStore>(std::move(metadata_options));
    store = leveldb.get();
    components_.push_back(std::move(leveldb));
  }
  broker::BootstrapDefaults defaults;
  defaults.cluster = config_.cluster_name;
  broker::RetentionDefaults defaults_retention;
  defaults_retention.kafka_time_ms = config_.kafka_default_retention_ms;
  defaults_retention.kafka_size_bytes = config_.kafka_default_retention_bytes;
  defaults_retention.kafka_configured =
      config_.kafka_default_retention_ms != Config::kKafkaDefaultRetentionMs || config_.kafka_default_retention_bytes != -1;
  defaults.retention = defaults_retention;
  // A port chosen at start-up (0) or off names no stable address: leave it out.
  auto fixed = [](int32_t port) { return port > 0; };
  if (fixed(config_.http_port)) defaults.cluster_info.service_url = fmt::format("http://{}:{}", host, config_.http_port);
  if (fixed(config_.pulsar_port)) {
    defaults.cluster_info.broker_service_url = fmt::format("pulsar://{}:{}", host, config_.pulsar_port);
  }
  if (fixed(config_.web_service_port_tls)) {
    defaults.cluster_info.service_url_tls = fmt::format("https://{}:{}", host, config_.web_service_port_tls);
  }
  if (fixed(config_.broker_service_port_tls)) {
    defaults.cluster_info.broker_service_url_tls = fmt::format("pulsar+ssl://{}:{}", host, config_.broker_service_port_tls);
  }
  // Each protocol's listeners: the plaintext one unless off, the TLS one when on.
  // A member without the broker role serves no client protocol.
  const bool serves_clients = config_.has_role("broker");
  auto listen = [this](int32_t port, int32_t tls_port) {
    runtime::ListenerPorts p;
    p.plain_enabled = port != Config::kPortOff;
    p.port = static_cast<uint16_t>(std::max(port, 0));
    if (tls_port != Config::kPortOff) {
      p.tls = tls_;
      p.tls_port = static_cast<uint16_t>(tls_port);
    }
    return p;
  };
  metadata::Store& metadata_store = *store;
  // Split bundles, known before any topic is looked up.
  components_.push_back(std::make_unique<broker::BundleLayoutWatch>(metadata_store));
  auto tenancy = std::make_unique<broker::Tenancy>(*store, std::move(defaults));
  broker::Tenancy* tenancy_ptr = tenancy.get();  // still needed once it joined components_
  // The log: entries on disk under <data-dir>/storage, then the topics on it.
  storage::StorageOptions storage_options;
  storage_options.directory = config_.data_dir + "/storage";
  storage_options.fsync_mode = config_.fsync == "never"      ? storage::FsyncMode::kNever
                               : config_.fsync == "interval" ? storage::FsyncMode::kInterval
                                                             : storage::FsyncMode::kAlways;
  storage_options.fsync_interval = std::chrono::milliseconds(config_.fsync_interval_ms);
  storage_options.compact_ratio = config_.segment_compact_ratio;
  if (config_.ephemeral) {
    storage_options.file_ops = unsynced_file_ops();
    storage_options.index_env = unsynced_leveldb_env();
  }
  auto storage = storage::make_local_storage(storage_options);
  // A cluster member is a storage node too, and its topics write through
  // the replicated storage: each ledger on several members (replication/).
  std::unique_ptr<StorageNodeService> storage_node;
  std::unique_ptr<replication::ReplicatedStorage> replicated;
  if (cluster_) {
    storage_node = std::make_unique<StorageNodeService>(*cluster_, *store, *storage, storage_options.directory,
                                                        config_.data_dir + "/storage-fences");
    storage_node->set_roles(directory_, config_.has_role("storage"), config_.zone, config_.storage_group);
    replication::ReplicationSettings replication_settings;
    replication_settings.heal_grace = std::chrono::seconds(config_.storage_heal_grace_secs);
    if (config_.storage_heal_grace_secs == 0) replication_settings.heal_interval = std::chrono::milliseconds(0);
    replication_settings.heal_rate_bytes = uint64_t{config_.storage_heal_rate_mb} << 20;
    replicated = std::make_unique<replication::ReplicatedStorage>(*storage_node, *store, *storage,
                                                                  replication_settings);
    replicated_ = replicated.get();
    // The metadata leader checks the ledgers and mends what a lost member held.
    replicated->set_healer([cluster = cluster_]() {
      for (const auto& m : cluster->members()) {
        if (m.leader) return m.id == cluster->id();
      }
      return false;
    });
  }
  storage::Storage& topic_storage = replicated ? static_cast<storage::Storage&>(*replicated) : *storage;
  auto policies = std::make_unique<broker::PolicyCache>(*store);
  const broker::PolicyCache* policies_ptr = policies.get();  // still needed once it joined components_
  if (config_.authorization_enabled) {
    std::set<std::string> superusers(config_.superuser_roles.begin(), config_.superuser_roles.end());
    if (superusers.empty()) MLOG_WARN("authorization is on with no --superuser-roles: nobody can create tenants");
    authorizer_ = std::make_unique<security::Authorizer>(*policies_ptr, std::move(superusers));
  }
  const broker::Authorization& authorization =
      authorizer_ ? static_cast<const broker::Authorization&>(*authorizer_) : broker::allow_all_authorization();
  broker::BrokerOptions broker_options;
  broker_options.maintenance_interval = std::chrono::seconds(config_.housekeeping_secs);
  broker_options.topic_idle_unload = std::chrono::seconds(config_.topic_idle_unload_secs);
  broker_options.compaction_max_read_bytes_per_second = int64_t{config_.compaction_max_read_mib_per_sec} << 20;
  broker_options.managed_ledger.max_entries_per_ledger = config_.managed_ledger_max_entries_per_ledger;
  broker_options.retention_defaults = defaults_retention;
  const std::string fsync_text =
      config_.fsync == "interval" ? "every " + std::to_string(config_.fsync_interval_ms) + " ms" : config_.fsync;
  broker_options.storage_durability = cluster_ ? "up to 3 copies on storage nodes, stored at 2 (fewer when fewer are "
                                                 "live), fsync " + fsync_text
                                               : "1 copy on this node, fsync " + fsync_text;
  auto broker = std::make_unique<broker::BrokerService>(*runtime_, topic_storage, *store, broker_options);
  broker::BrokerService* broker_ptr = broker.get();  // still needed once it joined components_
  broker->set_ownership(ownership_);
  if (ownership_ != nullptr) {
    ownership_->set_unloader([broker_ptr](const std::string& bundle, std::function<void()> done) {
      broker_ptr->unload_bundle(bundle, std::move(done));
    });
  }
  broker->set_remote_calls(remote_calls_.get());
  if (cluster_) broker->set_lease([cluster = cluster_]() { return cluster->lease_valid(); });
  broker->set_policies(policies.get());
  policies->on_change(broker->policy_listener());
  policies->on_change(broker->policy_change_listener());
  // Geo-replication: each topic of a namespace replicated to other clusters
  // gets a replicator per remote cluster when its policies are applied.
  georep::GeoReplicationOptions georep_options;
  georep_options.local_cluster = config_.cluster_name;
  auto geo = std::make_unique<georep::GeoReplication>(*tenancy_ptr, metadata_store, georep_options);
  georep::GeoReplication* geo_ptr = geo.get();  // resumed once everything started
  if (cluster_) {
    // One member sends the cluster's tenants to the other clusters: the metadata leader.
    geo->set_config_leads([cluster = cluster_]() {
      for (const auto& m : cluster->members()) {
        if (m.leader) return m.id == cluster->id();
      }
      return false;
    });
  }
  broker->set_topic_policies_hook([g = geo.get()](broker::Topic& topic, const broker::NamespacePolicies& policies) {
    g->on_policies(topic, policies);
  });
  broker->set_message_describer(protocol::pulsar::describe_entry);
  broker->set_compaction_codec(std::make_shared<protocol::pulsar::PulsarCompactionCodec>());
  // Topic counts: the broker asks tenancy (which reads what metadata knows
  // and what the broker has loaded) before it creates a topic in a
  // namespace or tenant that limits them.
  tenancy->set_loaded_topics([b = broker.get()]() { return b->loaded_topic_names(); });
  broker->set_topic_admitter([t = tenancy.get()](const broker::TopicName& topic, std::function<void(Status)> done) {
    Status queued = t->submit([t, topic, done]() { done(t->admit_topic(topic)); });
    if (!queued.is_ok()) done(queued);
  });
  broker->set_subscription_admitter([t = tenancy.get()](const broker::TopicName& topic, const std::string& subscription,
                                                        std::function<void(Status)> done) {
    Status queued = t->submit([t, topic, subscription, done]() { done(t->admit_subscription(topic, subscription)); });
    if (!queued.is_ok()) done(queued);
  });
  admin::AdvertisedAddress address;
  address.host = host;
  // The Pulsar port actually bound (known once the listener started).
  address.pulsar_port = [this]() { return ports_.pulsar; };
  address.pulsar_tls_port = [this]() { return ports_.pulsar_tls; };
  address.http_tls_port = [this]() { return ports_.http_tls; };
  const runtime::ListenerPorts http_ports = listen(config_.http_port, config_.web_service_port_tls);
  auto admin = std::make_unique<admin::AdminService>(*runtime_, config_.bind, http_ports.port, registry,
                                                     tenancy.get(), broker.get(), std::move(address));
  admin->serve_tls(http_ports.plain_enabled, http_ports.tls, http_ports.tls_port);
  admin::HttpLimits http_limits;
  http_limits.request_timeout = std::chrono::seconds(config_.http_request_timeout_secs);
  http_limits.idle_timeout = std::chrono::seconds(config_.http_idle_timeout_secs);
  admin->set_http_limits(http_limits);
  if (authenticator_) admin->require_authentication(*authenticator_, authorization);
  components_.push_back(std::move(tenancy));
  components_.push_back(std::move(policies));
  // The SCRAM users of the Kafka listener, loaded before it opens.
  auto scram = std::make_unique<security::ScramCredentials>(metadata_store);
  admin::register_scram_user_routes(admin->router(), *tenancy_ptr, *scram);
  security::ScramCredentials* scram_ptr = scram.get();
  components_.push_back(std::move(scram));
  protocol::pulsar::PulsarServiceOptions pulsar_options;
  pulsar_options.bind = config_.bind;
  auto client_listen = [&](int32_t port, int32_t tls_port) {
    return serves_clients ? listen(port, tls_port) : listen(Config::kPortOff, Config::kPortOff);
  };
  const runtime::ListenerPorts pulsar_ports = client_listen(config_.pulsar_port, config_.broker_service_port_tls);
  pulsar_options.port = pulsar_ports.port;
  pulsar_options.plain_enabled = pulsar_ports.plain_enabled;
  pulsar_options.tls = pulsar_ports.tls;
  pulsar_options.tls_port = pulsar_ports.tls_port;
  pulsar_options.advertised_host = host;
  pulsar_options.cluster_name = config_.cluster_name;
  pulsar_options.server_version = std::string("Magnetar ") + version();
  pulsar_options.keepalive = std::chrono::seconds(config_.keepalive_secs);
  auto pulsar = std::make_unique<protocol::pulsar::PulsarService>(*runtime_, *broker, metadata_store, pulsar_options);
  schemas_ = std::make_unique<broker::SchemaRegistry>(metadata_store);
  pulsar->set_metadata(tenancy_ptr, schemas_.get());
  if (authenticator_) pulsar->set_authenticator(authenticator_.get());
  pulsar->set_authorization(&authorization);
  admin::register_schema_routes(admin->router(), *tenancy_ptr, *schemas_);
  pulsar_ = pulsar.get();
  protocol::kafka::KafkaServiceOptions kafka_options;
  kafka_options.bind = config_.bind;
  const runtime::ListenerPorts kafka_ports = client_listen(config_.kafka_port, config_.kafka_port_tls);
  kafka_options.port = kafka_ports.port;
  kafka_options.plain_enabled = kafka_ports.plain_enabled;
  kafka_options.tls = kafka_ports.tls;
  kafka_options.tls_port = kafka_ports.tls_port;
  kafka_options.advertised_host = host;
  kafka_options.cluster_id = config_.cluster_name;
  kafka_options.node_id = broker_id_;
  kafka_options.log_dir = config_.data_dir;
  auto kafka = std::make_unique<protocol::kafka::KafkaService>(*runtime_, *broker, kafka_options);
  kafka->set_metadata(tenancy_ptr, policies_ptr);
  if (authenticator_) kafka->set_authenticator(authenticator_.get(), /*required=*/true);
  kafka->set_authorization(&authorization);
  kafka->set_scram_credentials(scram_ptr);
  kafka_ = kafka.get();
  protocol::amqp::AmqpServiceOptions amqp_options;
  amqp_options.bind = config_.bind;
  const runtime::ListenerPorts amqp_ports = client_listen(config_.amqp_port, config_.amqp_port_tls);
  amqp_options.port = amqp_ports.port;
  amqp_options.plain_enabled = amqp_ports.plain_enabled;
  amqp_options.tls = amqp_ports.tls;
  amqp_options.tls_port = amqp_ports.tls_port;
  amqp_options.cluster_name = config_.cluster_name;
  amqp_options.server_version = version();
  auto amqp = std::make_unique<protocol::amqp::AmqpService>(*runtime_, *broker, metadata_store, amqp_options);
  amqp->set_tenancy(tenancy_ptr);
  if (authenticator_) amqp->set_authenticator(authenticator_.get());
  amqp->set_authorization(&authorization);
  if (cluster_) amqp->set_cluster_member(cluster_->id());
  amqp_ = amqp.get();
  auto storage_quotas = std::make_unique<broker::StorageQuotas>(
      metadata_store, *broker, std::chrono::seconds(config_.storage_quota_check_secs));
  admin::register_tenant_usage_routes(admin->router(), *tenancy_ptr, *broker, *storage_quotas);
  store_ = &metadata_store;
  admin::register_node_routes(admin->router(), *tenancy_ptr, config_.cluster_name, [this]() { return nodes(); });
  admin::StorageNodesAdmin storage_admin;
  storage_admin.set_draining = [this](uint64_t node, bool drain) { return set_draining(node, drain); };
  storage_admin.status = [this](uint64_t node) { return storage_status(node); };
  storage_admin.overview = [this]() { return storage_overview(); };
  admin::register_storage_node_routes(admin->router(), *tenancy_ptr, std::move(storage_admin));
  // Started before the broker, so that it reads the first ledger id this
  // process may hand out before any topic opens (ledger_reconciler.h).
  auto reconciler = std::make_unique<ledger::LedgerReconciler>(*storage, metadata_store,
                                                               std::chrono::seconds(config_.ledger_reconcile_secs));
  // A member's local storage holds its copies; the other ledgers are on other members.
  reconciler->set_holds_every_ledger(replicated_ == nullptr);
  if (replicated_ != nullptr) reconciler->set_ledger_records(replication::kLedgersPrefix);
  components_.push_back(std::move(storage));
  if (storage_node) components_.push_back(std::move(storage_node));
  if (replicated) components_.push_back(std::move(replicated));
  components_.push_back(std::move(reconciler));
  components_.push_back(std::move(geo));  // before the broker: stopped after it, once no topic uses it
  components_.push_back(std::move(broker));
  components_.push_back(std::move(storage_quotas));
  components_.push_back(std::move(pulsar));
  components_.push_back(std::move(kafka));
  components_.push_back(std::move(amqp));
  if (cluster_ && ownership_ != nullptr && config_.has_role("broker")) {
    LoadManager::Options load_options;
    load_options.shed_interval = std::chrono::seconds(config_.load_balancer_shed_secs);
    load_options.auto_split = config_.load_balancer_auto_split;
    load_options.split.topics = config_.bundle_split_max_topics;
    load_options.split.sessions = config_.bundle_split_max_sessions;
    load_options.split.msg_rate = config_.bundle_split_max_msg_rate;
    load_options.split.bytes_rate = config_.bundle_split_max_mbytes * 1024.0 * 1024.0;
    auto load_manager = std::make_unique<LoadManager>(
        metadata_store, *broker_ptr, *ownership_, cluster_->reactor(), cluster_->id(),
        [cluster = cluster_]() { return cluster->lease_valid(); }, load_options);
    LoadManager* load = load_manager.get();
    admin->set_cluster_load([load]() { return load->view(); });
    components_.push_back(std::move(load_manager));
  }
  if (config_.trial) {
    auto key_bytes = security::TokenKey::read_key_bytes(config_.token_secret_key);
    if (!key_bytes.is_ok()) {
      stop();
      return key_bytes.status();
    }
    trial::TrialOptions trial_options;
    trial_options.expiry = std::chrono::seconds(config_.trial_expiry_secs);
    trial_options.invite_codes = config_.trial_invite_codes;
    trial_options.cluster = config_.cluster_name;
    trial_options.max_trials = config_.trial_max_trials;
    trial_options.signups.per_address = config_.trial_signups_per_address;
    trial_options.signups.total = config_.trial_signups_total;
    trial_options.signups.window = std::chrono::seconds(config_.trial_signup_window_secs);
    broker::TenantLimits& l = trial_options.limits;
    l.max_namespaces = 1;
    l.max_topics = config_.trial_max_topics;
    l.storage_quota_bytes = config_.trial_storage_quota_bytes;
    l.publish_msgs_per_second = config_.trial_publish_rate_msgs;
    l.publish_bytes_per_second = config_.trial_publish_rate_bytes;
    l.dispatch_msgs_per_second = config_.trial_dispatch_rate_msgs;
    l.dispatch_bytes_per_second = config_.trial_dispatch_rate_bytes;
    l.max_connections = config_.trial_max_connections;
    l.max_producers = config_.trial_max_producers;
    l.max_consumers = config_.trial_max_consumers;
    l.max_subscriptions = config_.trial_max_subscriptions;
    l.max_message_bytes = config_.trial_max_message_bytes;
    auto trials = std::make_unique<trial::TrialService>(*tenancy_ptr, *broker_ptr, metadata_store, *policies_ptr,
                                                        security::TokenKey::secret(std::move(*key_bytes)),
                                                        std::move(trial_options));
    trial::register_trial_routes(*admin, *trials, [this]() { return client_addresses(); });
    trials_ = trials.get();
    components_.push_back(std::move(trials));
  }
  admin_ = admin.get();
  components_.push_back(std::move(admin));

  for (size_t i = started_; i < components_.size(); i++) {
    auto& c = components_[i];
    Status st = c->start();
    if (!st.is_ok()) {
      MLOG_ERROR("{} failed to start: {}", c->name(), st.to_string());
      stop();
      return st;
    }
    ++started_;
  }
  geo_ptr->resume(*broker_ptr);
  ports_.http = admin_->port();
  ports_.pulsar = pulsar_->port();
  ports_.kafka = kafka_->port();
  ports_.amqp = amqp_->port();
  ports_.http_tls = admin_->tls_port();
  ports_.pulsar_tls = pulsar_->tls_port();
  ports_.kafka_tls = kafka_->tls_port();
  ports_.amqp_tls = amqp_->tls_port();
  ports_.cluster = cluster_ ? static_cast<uint16_t>(cluster_->port()) : 0;
  Status st = write_ports_file();
  if (st.is_ok() && cluster_) {
    // What the other members and the admin API tell clients about this node.
    auto put = metadata::blocking::put(*store_, "/cluster/nodes/" + std::to_string(cluster_->id()),
                                       node_record().dump());
    st = put.is_ok() ? Status::ok() : put.status();
  }
  if (!st.is_ok()) {
    stop();
    return st;
  }
  return Status::ok();
}

common::Result<int32_t> Server::allocate_broker_id(metadata::Store& store, uint64_t node) {
  // Kafka clients cache broker ids: a node keeps the one it got first. The
  // first node gets 0, the id a standalone node always had.
  const std::string mine = "/cluster/broker-ids/" + std::to_string(node);
  const std::string next_key = "/cluster/next-broker-id";
  for (int attempt = 0; attempt < 100; attempt++) {
    auto existing = metadata::blocking::get(store, mine);
    if (existing.is_ok()) return static_cast<int32_t>(std::strtol(existing->value.c_str(), nullptr, 10));
    if (existing.status().code() != common::ErrorCode::kNotFound) return existing.status();
    auto counter = metadata::blocking::get(store, next_key);
    int64_t next = 0;
    metadata::PutOptions cas;
    if (counter.is_ok()) {
      next = std::strtoll(counter->value.c_str(), nullptr, 10);
      cas.expected_version = counter->stat.version;
    } else if (counter.status().code() == common::ErrorCode::kNotFound) {
      cas.expected_version = metadata::kMustNotExist;
    } else {
      return counter.status();
    }
    auto bumped = metadata::blocking::put(store, next_key, std::to_string(next + 1), cas);
    if (!bumped.is_ok()) continue;  // another node took it: read again
    metadata::PutOptions create;
    create.expected_version = metadata::kMustNotExist;
    auto taken = metadata::blocking::put(store, mine, std::to_string(next), create);
    if (taken.is_ok()) {
      MLOG_INFO("cluster: this node's Kafka broker id is {}", next);
      return static_cast<int32_t>(next);
    }
    if (taken.status().code() != common::ErrorCode::kAlreadyExists) return taken.status();
  }
  return Status::unavailable("could not allocate a broker id: too many concurrent attempts");
}

nlohmann::json Server::node_record() const {
  std::string host = config_.effective_advertised_address();
  nlohmann::json j = {{"roles", config_.roles}, {"version", version()}, {"brokerId", broker_id_}};
  if (!config_.zone.empty()) j["zone"] = config_.zone;
  if (!config_.storage_group.empty()) j["storageGroup"] = config_.storage_group;
  if (ports_.http != 0) j["httpUrl"] = fmt::format("http://{}:{}", host, ports_.http);
  if (ports_.pulsar != 0) j["brokerServiceUrl"] = fmt::format("pulsar://{}:{}", host, ports_.pulsar);
  if (ports_.pulsar_tls != 0) j["brokerServiceUrlTls"] = fmt::format("pulsar+ssl://{}:{}", host, ports_.pulsar_tls);
  if (ports_.kafka != 0) j["kafkaAddress"] = fmt::format("{}:{}", host, ports_.kafka);
  if (ports_.amqp != 0) j["amqpUrl"] = fmt::format("amqp://{}:{}", host, ports_.amqp);
  return j;
}

common::Result<std::vector<admin::NodeView>> Server::nodes() const {
  std::vector<admin::NodeView> out;
  if (!cluster_) {
    admin::NodeView self;
    self.id = 0;
    self.raft_role = "standalone";
    self.leader = true;
    self.alive = true;
    self.record = node_record();
    out.push_back(std::move(self));
    return out;
  }
  // From what this member applied (the directory's watch), not reads through
  // the leader: a member cut off from the majority still shows its own view.
  std::map<uint64_t, nlohmann::json> records;
  if (directory_ != nullptr) {
    for (const auto& [id, value] : directory_->published()) {
      auto j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
      if (!j.is_discarded()) records[id] = std::move(j);
    }
  }
  for (const auto& m : cluster_->members()) {
    admin::NodeView view;
    view.id = m.id;
    view.cluster_address = m.address;
    view.raft_role = std::string(cluster::role_name(m.role));
    view.leader = m.leader;
    view.alive = m.alive;
    view.applied_index = m.applied_index;
    auto it = records.find(m.id);
    if (m.id == cluster_->id()) {
      view.record = node_record();  // its own, even before the watch brings it back
    } else if (it != records.end()) {
      view.record = it->second;
    }
    if (ownership_ != nullptr) view.record["ownedBundles"] = ownership_->bundles_of(m.id);
    if (replicated_ != nullptr) {
      const std::vector<uint64_t> draining = replicated_->draining();
      const bool leaving = std::find(draining.begin(), draining.end(), m.id) != draining.end();
      view.record["storageState"] = leaving ? "decommissioned" : "active";
    }
    out.push_back(std::move(view));
  }
  return out;
}

void Server::stop() {
  // A graceful stop of a member first hands its bundles to the others,
  // while its listeners still tell clients where their topics went.
  if (ownership_ != nullptr && started_ == components_.size() && config_.has_role("broker")) {
    size_t moved = ownership_->hand_over(std::chrono::seconds(10));
    if (moved > 0) MLOG_INFO("handed {} bundles over to other brokers", moved);
  }
  if (tls_watcher_.joinable()) {
    {
      std::lock_guard lock(tls_watch_mu_);
      tls_watch_stop_ = true;
    }
    tls_watch_cv_.notify_all();
    tls_watcher_.join();
  }
  while (started_ > 0) {
    auto& c = components_[--started_];
    MLOG_DEBUG("stopping {}", c->name());
    c->stop();
  }
  components_.clear();
  admin_ = nullptr;
  pulsar_ = nullptr;
  kafka_ = nullptr;
  amqp_ = nullptr;
  trials_ = nullptr;
  cluster_ = nullptr;
  store_ = nullptr;
  ownership_ = nullptr;
  directory_ = nullptr;
  replicated_ = nullptr;
  remote_calls_.reset();
  for (uint64_t id : collector_ids_) common::MetricsRegistry::global().remove_collector(id);
  collector_ids_.clear();
  stall_probe_.reset();
  if (runtime_) {
    runtime_->stop();
    runtime_.reset();
  }
  if (wrote_ports_file_) {
    std::remove(config_.ports_file.c_str());
    wrote_ports_file_ = false;
  }
  if (lock_fd_ >= 0) {
    ::close(lock_fd_);  // releases the flock
    lock_fd_ = -1;
  }
}

nlohmann::json Server::client_addresses() const {
  std::string host = config_.effective_advertised_address();
  nlohmann::json j = nlohmann::json::object();
  if (ports_.pulsar != 0) j["pulsar"] = fmt::format("pulsar://{}:{}", host, ports_.pulsar);
  if (ports_.pulsar_tls != 0) j["pulsarTls"] = fmt::format("pulsar+ssl://{}:{}", host, ports_.pulsar_tls);
  if (ports_.http != 0) j["http"] = fmt::format("http://{}:{}", host, ports_.http);
  if (ports_.http_tls != 0) j["https"] = fmt::format("https://{}:{}", host, ports_.http_tls);
  if (ports_.kafka != 0) j["kafka"] = fmt::format("{}:{}", host, ports_.kafka);
  if (ports_.kafka_tls != 0) j["kafkaTls"] = fmt::format("{}:{}", host, ports_.kafka_tls);
  if (ports_.amqp != 0) j["amqp"] = fmt::format("amqp://{}:{}", host, ports_.amqp);
  if (ports_.amqp_tls != 0) j["amqps"] = fmt::format("amqps://{}:{}", host, ports_.amqp_tls);
  return j;
}

std::vector<std::string> Server::banner() const {
  std::string host = config_.effective_advertised_address();
  std::vector<std::string> lines;
  lines.push_back(fmt::format("Magnetar {} (cluster '{}', {} reactors, data in {})", version(),
                              config_.cluster_name, runtime_ ? runtime_->size() : 0, config_.data_dir));
  // A listener that is off has port 0 here (a bound one never does).
  auto line = [&](const char* what, const char* scheme, uint16_t port, const char* path) {
    if (port != 0) lines.push_back(fmt::format("  {:<12} {}{}:{}{}", what, scheme, host, port, path));
  };
  line("pulsar", "pulsar://", ports_.pulsar, "");
  line("pulsar tls", "pulsar+ssl://", ports_.pulsar_tls, "");
  line("kafka", "", ports_.kafka, "");
  line("kafka tls", "", ports_.kafka_tls, "");
  line("amqp", "amqp://", ports_.amqp, "");
  line("amqps", "amqps://", ports_.amqp_tls, "");
  if (cluster_) {
    lines.push_back(fmt::format("  {:<12} {} (member {}, {} members)", "cluster", cluster_->address(), cluster_->id(),
                                cluster_->members().size()));
  }
  for (auto [scheme, port] : {std::pair{"http://", ports_.http}, std::pair{"https://", ports_.http_tls}}) {
    line("web console", scheme, port, "/");
    line("admin REST", scheme, port, "/admin/v2");
    line("metrics", scheme, port, "/metrics");
    line("health", scheme, port, "/admin/v2/brokers/health");
  }
  if (config_.trial) {
    lines.push_back(fmt::format("  {:<12} sign-up on the web console; each trial lasts {} s{}", "trial",
                                config_.trial_expiry_secs,
                                config_.trial_invite_codes.empty() ? "" : " and needs an invite code"));
  }
  return lines;
}

}  // namespace magnetar::server
