// Server: assembles a Magnetar node from one Config and owns its start/stop.
//
// Start-up order: data directory (locked against a second process), runtime,
// then components in dependency order; the bound ports are written to
// <data-dir>/ports.json (and to Config::ports_file when set). stop() runs components' stop in reverse, then the
// runtime. Start-up does only what serving needs; everything else is lazy.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/status.h"
#include "security/authorizer.h"
#include "security/token_authenticator.h"
#include "runtime/component.h"
#include "runtime/runtime.h"
#include "runtime/tls_context.h"
#include "server/config.h"
#include "broker/bundle_ownership.h"
#include "server/node_directory.h"
#include "server/stall_probe.h"

namespace magnetar::cluster {
class ClusterNode;
}

namespace magnetar::replication {
class ReplicatedStorage;
}

namespace magnetar::metadata {
class Store;
}

namespace magnetar::admin {
class AdminService;
struct NodeView;
}
namespace magnetar::broker {
class SchemaRegistry;
}
namespace magnetar::protocol::pulsar {
class PulsarService;
}
namespace magnetar::protocol::kafka {
class KafkaService;
}
namespace magnetar::protocol::amqp {
class AmqpService;
}
namespace magnetar::trial {
class TrialService;
}

namespace magnetar::server {

struct BoundPorts {
  uint16_t http = 0;
  uint16_t pulsar = 0;
  uint16_t kafka = 0;
  uint16_t amqp = 0;
  // TLS listeners; 0 when off.
  uint16_t pulsar_tls = 0;
  uint16_t http_tls = 0;
  uint16_t kafka_tls = 0;
  uint16_t amqp_tls = 0;
  uint16_t cluster = 0;  // a cluster member's cluster port; 0 when standalone
};

class Server {
 public:
  explicit Server(Config config);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Main thread. On failure everything started so far is stopped again.
  common::Status start();
  // Main thread. Idempotent.
  void stop();

  const Config& config() const { return config_; }
  const BoundPorts& ports() const { return ports_; }
  // The bound ports as ports.json holds them: {"http": 8080, "pulsar": 6650, ...};
  // listeners that are off are 0, TLS and cluster ports appear only when on.
  nlohmann::json ports_json() const;
  runtime::Runtime& runtime() { return *runtime_; }
  // The addresses clients connect to, as the trial's quick starts show them:
  // {"pulsar": "pulsar://host:6650", "http": ..., "kafka": "host:9092", "amqp": ...}.
  nlohmann::json client_addresses() const;
  // The lines of the start-up banner: what is served where.
  std::vector<std::string> banner() const;
  // Rebuilds the TLS context from its files now (SIGHUP). Any thread; a
  // failure keeps the previous certificates and is logged.
  void reload_tls();

 private:
  common::Status prepare_data_dir();
  common::Status prepare_authentication();
  // Trial mode: authentication and authorization on, the per-address
  // connection limit, the token key (made in the data directory when none is
  // given) and the invite codes file read.
  common::Status prepare_trial();
  common::Status prepare_tls();
  void watch_tls_files();
  common::Status write_ports_file();
  // A cluster member's Kafka broker id: the one it got at its first start.
  static common::Result<int32_t> allocate_broker_id(metadata::Store& store, uint64_t node);
  // What this node tells the others and the admin API about itself.
  nlohmann::json node_record() const;
  // Every node of the cluster (this one alone when standalone). Blocks.
  common::Result<std::vector<admin::NodeView>> nodes() const;
  // Decommissioning storage nodes (replication/): start or cancel; progress. Block.
  common::Status set_draining(uint64_t node, bool drain);
  common::Result<nlohmann::json> storage_status(uint64_t node) const;
  // GET /admin/v2/cluster/storage (storage_admin.cc).
  common::Result<nlohmann::json> storage_overview() const;

  Config config_;
  std::unique_ptr<runtime::Runtime> runtime_;
  std::vector<std::unique_ptr<runtime::Component>> components_;  // in start order
  std::unique_ptr<broker::SchemaRegistry> schemas_;  // on the metadata store; no thread of its own
  size_t started_ = 0;
  admin::AdminService* admin_ = nullptr;
  protocol::pulsar::PulsarService* pulsar_ = nullptr;
  protocol::kafka::KafkaService* kafka_ = nullptr;
  protocol::amqp::AmqpService* amqp_ = nullptr;
  cluster::ClusterNode* cluster_ = nullptr;  // a cluster member's membership; null when standalone
  trial::TrialService* trials_ = nullptr;    // in trial mode
  metadata::Store* store_ = nullptr;         // the metadata store the components use
  int32_t broker_id_ = 0;                    // Kafka's broker id for this node
  NodeDirectory* directory_ = nullptr;        // a cluster member's view of the nodes
  broker::BundleOwnership* ownership_ = nullptr;  // a cluster member's topic ownership
  replication::ReplicatedStorage* replicated_ = nullptr;  // a cluster member's replicated ledgers
  std::unique_ptr<broker::RemoteCalls> remote_calls_;  // a cluster member's calls to the others
  std::vector<uint64_t> collector_ids_;
  std::unique_ptr<StallProbe> stall_probe_;  // unless --stall-probe-ms 0
  std::unique_ptr<security::TokenAuthenticator> authenticator_;  // when authentication is on
  std::unique_ptr<security::Authorizer> authorizer_;             // when authorization is on
  std::shared_ptr<runtime::TlsContextSource> tls_;  // when a TLS listener is on
  std::thread tls_watcher_;                         // checks tls_'s files for changes
  std::mutex tls_watch_mu_;
  std::condition_variable tls_watch_cv_;
  bool tls_watch_stop_ = false;  // guarded by tls_watch_mu_
  BoundPorts ports_;
  int lock_fd_ = -1;
  bool wrote_ports_file_ = false;  // config_.ports_file, removed by stop()
};

// The version string of this build, e.g. "0.1.0".
const char* version();

}  // namespace magnetar::server
