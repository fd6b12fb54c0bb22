// AmqpService: the AMQP 0-9-1 listener (port 5672 by default), translating
// AMQP onto the protocol-neutral broker API.
//
// Mapping (docs/protocol-amqp.md): vhost "tenant/namespace" is that
// namespace ("/" is public/default); queue `q` is the persistent topic
// persistent://tenant/namespace/q and its Shared subscription "amqp", so a
// queue's messages are that subscription's backlog; an exchange is routing
// only: publishing writes the message to the topic of every queue it routes
// to.
//
// Topology (exchanges, queues, bindings) lives in memory per vhost, guarded
// by one lock; durable entities are also written to the metadata store under
//   /amqp/{tenant}/{namespace}/exchanges/{name}
//   /amqp/{tenant}/{namespace}/queues/{name}      (every queue; a transient one
//                                                  is deleted at the next start)
//   /amqp/{tenant}/{namespace}/bindings/{source},{q|e},{destination},{key},{args crc}
// (names percent-encoded) and read back at start.
//
// Threads: one AmqpConnection per client on the reactor that accepted it;
// topology calls from any reactor; metadata writes are issued under the
// topology lock, so the store applies them in the order the topology changed.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "broker/authentication.h"
#include "broker/authorization.h"
#include "broker/broker_service.h"
#include "broker/naming.h"
#include "broker/tenancy.h"
#include "common/metrics.h"
#include "metadata/store.h"
#include "protocol/amqp/frame.h"
#include "protocol/amqp/server/queue_limits.h"
#include "protocol/amqp/server/topology.h"
#include "runtime/component.h"
#include "runtime/runtime.h"
#include "runtime/tcp_listener.h"

namespace magnetar::protocol::amqp {

class RemoteConsumers;

inline constexpr size_t kDefaultMaxTxMessages = 10000;
inline constexpr size_t kDefaultMaxTxBytes = 64 << 20;

struct AmqpServiceOptions {
  std::string bind = "127.0.0.1";
  uint16_t port = 5672;
  // Plaintext listener on `port` unless off; TLS listener on `tls_port`
  // when `tls` is set.
  bool plain_enabled = true;
  std::shared_ptr<runtime::TlsContextSource> tls;
  uint16_t tls_port = 0;
  std::string cluster_name = "standalone";
  std::string server_version = "Magnetar";
  // What connection.tune proposes; the client may lower each.
  uint16_t channel_max = 2047;
  uint32_t frame_max = kDefaultFrameMax;
  uint16_t heartbeat_secs = 60;
  // Per connection, over its channels: the publishes and acknowledgements
  // transactions (tx.select) hold until tx.commit, and the publishes' body
  // bytes. The channel whose publish or acknowledgement would pass either
  // is closed with 406 PRECONDITION_FAILED naming the limit: holding the
  // client back instead would deadlock one that waits to commit.
  size_t max_tx_messages = kDefaultMaxTxMessages;
  size_t max_tx_bytes = kDefaultMaxTxBytes;
};

// What /metrics shows of AMQP (magnetar_amqp_*). Updated with relaxed
// atomics from any thread.
struct AmqpMetrics {
  common::Gauge& connections;
  common::Gauge& channels;
  common::Counter& published;
  common::Counter& delivered;
  common::Counter& dead_lettered;
  common::Counter& chunks_skipped;  // entries holding a chunk of a chunked Pulsar message
  // What a client never sees, each with a warning: stored entries a
  // consumer could not be given (acknowledged and skipped), dead-lettered
  // copies that could not be stored (the original is settled all the same,
  // as RabbitMQ's at-most-once dead-lettering drops it), and publishes
  // without confirms that could not be stored.
  common::Counter& undeliverable;
  common::Counter& dead_letter_failures;
  common::Counter& unconfirmed_publish_failures;
  // Copies a queue at its x-max-length(-bytes) refused (x-overflow
  // reject-publish, reject-publish-dlx): nacked to publishers with
  // confirms, dead-lettered with -dlx, else dropped as RabbitMQ drops them.
  common::Counter& overflow_rejected;
  // Cluster members: publishes whose copies went to (came from) another
  // member owning their queues' topics (forwarding.h).
  common::Counter& forwarded_out;
  common::Counter& forwarded_in;
  // Channel and connection exceptions raised, by reply code.
  void error(uint16_t code);
  static AmqpMetrics& get();
};

// Counts one open channel while it exists (a member of Channel).
class ChannelGauge {
 public:
  ChannelGauge() { AmqpMetrics::get().channels.add(1); }
  ~ChannelGauge() { AmqpMetrics::get().channels.add(-1); }
  ChannelGauge(const ChannelGauge&) = delete;
  ChannelGauge& operator=(const ChannelGauge&) = delete;
};

// The subscription behind every queue.
inline constexpr std::string_view kQueueSubscription = "amqp";
inline const std::string& queue_subscription() {
  static const std::string name(kQueueSubscription);
  return name;
}

class AmqpService final : public runtime::Component {
 public:
  AmqpService(runtime::Runtime& runtime, broker::BrokerService& broker, metadata::Store& store,
              AmqpServiceOptions options);
  ~AmqpService() override;
  std::string_view name() const override { return "amqp"; }
  // Reads the durable topology from metadata (blocking: main thread), then
  // listens.
  common::Status start() override;
  void stop() override;

  // Valid after start().
  uint16_t port() const { return listener_ ? listener_->port() : 0; }
  uint16_t tls_port() const { return tls_listener_ ? tls_listener_->port() : 0; }

  // Namespaces are checked at connection.open when tenancy is set; set
  // before start().
  void set_tenancy(broker::Tenancy* tenancy) { tenancy_ = tenancy; }
  broker::Tenancy* tenancy() { return tenancy_; }
  // Who checks PLAIN/AMQPLAIN credentials; accepts everyone unless set.
  void set_authenticator(broker::Authenticator* a) { authenticator_ = a; }
  broker::Authenticator& authenticator() { return *authenticator_; }
  // What roles may do (default: everything). Before start().
  void set_authorization(const broker::Authorization* a) { authorization_ = a; }
  const broker::Authorization& authorization() const { return *authorization_; }
  broker::BrokerService& broker() { return broker_; }
  const AmqpServiceOptions& options() const { return options_; }

  // A cluster member (`node`, its id): what other members declare appears
  // here too, as the topology records change (eventually: a declaration is
  // seen elsewhere shortly after its declare-ok). Before start().
  void set_cluster_member(uint64_t node) { node_ = node; }
  // The owner of an exclusive queue declared on another member: no
  // connection here has this id.
  static constexpr uint64_t kElsewhere = UINT64_MAX;
  // Consumers of queues other members own (cluster members only; else null).
  RemoteConsumers* remote_consumers() { return remote_consumers_.get(); }
  uint64_t next_id() { return next_id_.fetch_add(1, std::memory_order_relaxed); }
  // Dead-lettered copies are published by this producer (one per node).
  uint64_t dead_letter_producer_id() const { return dead_letter_producer_id_; }
  const std::string& dead_letter_producer() const { return dead_letter_producer_; }
  // Copies other cluster members send here are stored by this producer.
  uint64_t forwarded_producer_id() const { return forwarded_producer_id_; }
  uint64_t next_sequence() { return sequence_.fetch_add(1, std::memory_order_relaxed); }
  QueueKeeper& keeper() { return keeper_; }
  // Queues with dead-lettering, expiry, length limits or x-expires, as the
  // keeper sweeps them.
  struct LimitedQueue {
    QueueRef ref;
    int64_t last_used_ms = 0;
  };
  std::vector<LimitedQueue> limited_queues() const;
  bool has_limited_queues() const;
  // Marks queue `name` as used now (x-expires counts from the last use).
  void touch(const broker::NamespaceName& ns, const std::string& name);

  // True once stop() began: connections closing then start no broker work
  // that would outlive the broker.
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }

  // "/" (and "") is public/default; otherwise "tenant/namespace".
  static common::Result<broker::NamespaceName> namespace_of(std::string_view vhost);
  // The topic behind queue `queue` of `ns`: kInvalidArgument for a queue
  // name no topic can have ('/' or control characters).
  // Level `level` of a priority queue (x-max-priority) is topic
  // "<queue>-__priority-<level>"; level 0 is the queue's own topic.
  static common::Result<broker::TopicName> queue_topic(const broker::NamespaceName& ns, const std::string& queue,
                                                       uint8_t level = 0);
  // Every topic of a queue with `args`: its own, and one per priority level.
  static std::vector<broker::TopicName> queue_topics(const broker::NamespaceName& ns, const std::string& queue,
                                                     const QueueArguments& args);
  // The topic each of `queues` (routed in `t`) takes a message of
  // `priority` on: its own, or a priority queue's level for it.
  static std::vector<broker::TopicName> routed_topics(const Topology& t, const broker::NamespaceName& ns,
                                                      const std::vector<std::string>& queues,
                                                      std::optional<uint8_t> priority);

  // Runs `fn` with the vhost's topology under a shared (read) lock.
  template <typename Fn>
  auto read(const broker::NamespaceName& ns, Fn&& fn) {
    std::shared_lock lock(mu_);
    return fn(find_locked(ns));
  }
  // Runs `fn` with the vhost's topology and a Persist handle under the
  // exclusive lock; what `fn` records through the handle goes to metadata.
  class Persist;
  template <typename Fn>
  auto write(const broker::NamespaceName& ns, Fn&& fn) {
    std::unique_lock lock(mu_);
    Persist persist(*this, ns);
    return fn(topology_locked(ns), persist);
  }

  // Durable writes for one vhost, made while its topology is locked.
  // `done` (may be empty) runs once the store applied the write, on the
  // calling reactor.
  class Persist {
   public:
    Persist(AmqpService& service, const broker::NamespaceName& ns) : service_(service), ns_(ns) {}
    void save_exchange(const ExchangeDef& e, std::function<void(common::Status)> done = {});
    void forget_exchange(const std::string& name);
    void save_queue(const QueueDef& q, std::function<void(common::Status)> done = {});
    void forget_queue(const std::string& name);
    void save_binding(const Binding& b, std::function<void(common::Status)> done = {});
    void forget_binding(const Binding& b);

   private:
    AmqpService& service_;
    const broker::NamespaceName& ns_;
  };

 private:
  Topology& topology_locked(const broker::NamespaceName& ns);
  // The vhost's topology, or one with only the built-in exchanges.
  const Topology& find_locked(const broker::NamespaceName& ns) const;
  common::Status load_topology();
  void put(std::string key, std::string value, std::function<void(common::Status)> done);
  void del(std::string key);
  // Cluster members: other members' changes of the topology records are
  // applied here (topology sync in amqp_service.cc).
  struct RecordChange {
    broker::NamespaceName ns;
    std::string kind;    // exchanges, queues or bindings
    std::string record;  // the record's name
    std::string key;
    uint64_t seq = 0;    // the record's changes seen so far
  };
  void follow_topology();
  void record_changed(const std::string& key, bool deleted);
  void apply_record(const RecordChange& change, const nlohmann::json* record);
  // Around a write of this member's: `key` has one more (or one fewer)
  // write under way.
  void write_started(const std::string& key);
  void write_finished(const std::string& key);

  runtime::Runtime& runtime_;
  broker::BrokerService& broker_;
  metadata::Store& store_;
  broker::Tenancy* tenancy_ = nullptr;
  broker::AllowAllAuthenticator allow_all_;
  broker::Authenticator* authenticator_ = &allow_all_;
  const broker::Authorization* authorization_ = &broker::allow_all_authorization();
  AmqpServiceOptions options_;
  std::unique_ptr<runtime::TcpListener> listener_;      // null when off
  std::unique_ptr<runtime::TcpListener> tls_listener_;  // null when off
  std::atomic<uint64_t> next_id_{1};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> sequence_{0};
  uint64_t dead_letter_producer_id_ = 0;
  uint64_t forwarded_producer_id_ = 0;
  std::string dead_letter_producer_;
  QueueKeeper keeper_;
  mutable std::shared_mutex mu_;
  std::map<std::string, Topology> vhosts_;  // by "tenant/namespace"; guarded by mu_
  const Topology empty_;
  uint64_t node_ = 0;  // 0: a standalone node
  std::shared_ptr<RemoteConsumers> remote_consumers_;
  std::optional<metadata::WatchId> watch_;
  // Topology sync (cluster members). Store callbacks hold `life` shared
  // while they use this service; the destructor takes it exclusively and
  // clears `alive`. Lock order: life, mu_, mu.
  struct SyncState {
    std::shared_mutex life;
    bool alive = true;
    std::mutex mu;
    std::map<std::string, uint32_t> writes_under_way;  // by record key
    std::map<std::string, uint64_t> changes;  // records with a change being applied: its sequence number
  };
  std::shared_ptr<SyncState> sync_ = std::make_shared<SyncState>();
};

}  // namespace magnetar::protocol::amqp
