// KafkaService: the Kafka protocol listener (port 9092 by default),
// translating Kafka requests onto the protocol-neutral broker API.
//
// One KafkaConnection per client connection, on the reactor that accepted
// it. Topic work runs on the topic's home reactor (BrokerService::with_topic)
// and answers come back to the connection's reactor, where responses leave
// in request order as Kafka requires.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "broker/authentication.h"
#include "broker/authorization.h"
#include "broker/broker_service.h"
#include "broker/naming.h"
#include "broker/policy_cache.h"
#include "broker/tenancy.h"
#include "security/scram_credentials.h"
#include "protocol/kafka/header.h"
#include "protocol/kafka/server/fetch_groups.h"
#include "protocol/kafka/server/group_coordinator.h"
#include "protocol/kafka/server/producer_state.h"
#include "runtime/component.h"
#include "runtime/runtime.h"
#include "runtime/tcp_listener.h"

namespace magnetar::protocol::kafka {

inline constexpr size_t kDefaultMaxInflightRequests = 64;
inline constexpr size_t kDefaultMaxInflightBytes = 64 << 20;

struct KafkaServiceOptions {
  std::string bind = "127.0.0.1";
  uint16_t port = 9092;
  // Plaintext listener on `port` unless off; TLS listener on `tls_port`
  // when `tls` is set.
  bool plain_enabled = true;
  std::shared_ptr<runtime::TlsContextSource> tls;
  uint16_t tls_port = 0;
  std::string advertised_host;  // what Metadata hands out as this broker's host
  std::string cluster_id = "standalone";
  // The data directory, which DescribeLogDirs names as this broker's one log directory.
  std::string log_dir;
  // This broker's id in Metadata (a cluster member's comes from the metadata store).
  int32_t node_id = 0;
  // Kafka topic `t` is persistent://<default_namespace>/t.
  std::string default_namespace = "public/default";
  size_t max_request_bytes = kDefaultMaxRequestBytes;
  // Requests one connection may have awaiting their responses, and their
  // bytes (as received; for a Fetch, the MaxBytes its response may carry):
  // at either bound the connection stops decoding and reading
  // (back-pressure: Kafka's own broker mutes a connection while it handles
  // a request), and goes on once both are at half. A request over
  // max_inflight_bytes is still handled, alone.
  size_t max_inflight_requests = kDefaultMaxInflightRequests;
  size_t max_inflight_bytes = kDefaultMaxInflightBytes;
  // Members per consumer group and the exact offsets kept (group_coordinator.h).
  GroupCoordinatorOptions groups;
  // How long a Metadata request waits for the metadata store before it is
  // answered from what this node last read (while the store has no leader,
  // each read waits up to 15 s: longer than clients wait for an answer).
  std::chrono::milliseconds metadata_patience{5000};
};

// The topics of a namespace, as Metadata lists them: local name ->
// partitions (0: not partitioned).
using TopicTable = std::map<std::string, int32_t>;
struct TopicListing {
  TopicTable topics;
  // Every read of the metadata store answered. When not, `topics` holds
  // what was read and, for the rest, the last complete listing's topics.
  bool complete = false;
};
using TopicListingCallback = std::function<void(std::shared_ptr<const TopicListing>)>;

class KafkaService final : public runtime::Component {
 public:
  KafkaService(runtime::Runtime& runtime, broker::BrokerService& broker, KafkaServiceOptions options);
  ~KafkaService() override;
  std::string_view name() const override { return "kafka"; }
  common::Status start() override;
  void stop() override;

  // Valid after start().
  uint16_t port() const { return listener_ ? listener_->port() : 0; }
  uint16_t tls_port() const { return tls_listener_ ? tls_listener_->port() : 0; }

  // Namespaces' topic lists and auto-creation policy; set before start().
  // Without tenancy Metadata lists only the topics asked for; without
  // policies topics are created on first use.
  void set_metadata(broker::Tenancy* tenancy, const broker::PolicyCache* policies) {
    tenancy_ = tenancy;
    policies_ = policies;
  }
  broker::Tenancy* tenancy() { return tenancy_; }
  const broker::PolicyCache* policies() const { return policies_; }
  broker::BrokerService& broker() { return broker_; }
  // The consumer groups this node coordinates (all of them).
  GroupCoordinator& groups() { return *groups_; }
  // Which group a fetching connection reads for (fetch_groups.h).
  FetchGroups& fetch_groups() { return fetch_groups_; }
  const KafkaServiceOptions& options() const { return options_; }
  const broker::NamespaceName& default_namespace() const { return namespace_; }
  // The Pulsar topic behind Kafka topic `name` in namespace `ns` (the
  // connection's: the listener's default, or the one SASL/PLAIN named):
  // kInvalidArgument for a name Kafka does not allow ([a-zA-Z0-9._-], 1 to
  // 249 characters).
  common::Result<broker::TopicName> topic_for(const broker::NamespaceName& ns, const std::string& name) const;
  // Whether a missing topic may be created on first use (the namespace's
  // autoTopicCreation policy; allowed by default).
  bool may_create(const broker::TopicName& topic) const;
  // How many partitions a topic created on first use gets: the namespace's
  // autoTopicCreation default_partitions when its topicType is
  // "partitioned", else 0 (non-partitioned).
  int32_t partitions_on_creation(const broker::TopicName& topic) const;
  uint64_t next_id() { return next_id_.fetch_add(1, std::memory_order_relaxed); }

  // Runs `fn` on the home reactor of the Pulsar topic behind Kafka topic
  // `topic` of namespace `ns`, partition `partition`: partition `partition` of a partitioned
  // topic, or the topic itself (as partition 0) when it is not partitioned.
  // kInvalidArgument for a bad name, kNotFound for a partition the topic
  // does not have; a missing topic is created when may_create() allows.
  // Any thread; `fn` may also run on the calling thread (with an error) or
  // on the tenancy thread (with an error). Calls from one reactor for one
  // topic reach the topic in the order they were made, also while its
  // partition count is being looked up (a connection's pipelined Produce
  // requests are stored in order).
  // With `create` false a missing topic is never created (kNotFound): the
  // admin APIs that read or change a partition do not make one.
  void with_partition(const broker::NamespaceName& ns, const std::string& topic, int32_t partition,
                      ledger::Callback<common::Result<broker::Topic*>> fn, bool create = true);
  // Makes partitions [from, to) of partitioned topic `topic` now, recorded
  // as made through Kafka (broker/retention.h), so they keep Kafka's
  // retention whichever protocol uses them first. `done` (any thread) with
  // the first failure, else ok.
  void make_partitions(const broker::TopicName& topic, int32_t from, int32_t to, std::function<void(common::Status)> done);
  // The partition count metadata last gave for `topic` (0: not
  // partitioned); forgotten when the topic is deleted. Any thread.
  void remember_partitions(const broker::TopicName& topic, int32_t partitions);
  // What remember_partitions last recorded for `topic`; -1 when nothing. Any thread.
  int32_t known_partitions(const broker::TopicName& topic) const;
  void forget_partitions(const broker::TopicName& topic);

  // Lists the topics of `ns` on the tenancy thread and hands the listing to
  // `done` there (on the calling thread, incomplete, when the tenancy thread
  // takes no work). Requests that come while a listing of `ns` waits to
  // start share it; one that comes once it started waits for the next. So
  // each answer was read after its request came, and however many clients
  // ask, at most two listings of a namespace are queued or running.
  void list_topics(const broker::NamespaceName& ns, TopicListingCallback done);
  // The last complete listing of `ns` (empty when none yet), read without
  // the metadata store: what Metadata answers when a listing is late.
  std::shared_ptr<const TopicListing> last_listing(const broker::NamespaceName& ns) const;

  // Idempotent producers' sequence state of the partitions homed on the
  // calling reactor (producer_state.h). REQUIRES: on a reactor thread.
  ProducerStates& producer_states() { return *producer_states_[runtime::Reactor::current()->index()]; }
  ProducerIds& producer_ids() { return producer_ids_; }

  // Who Kafka clients are: SASL/PLAIN passwords go to `authenticator`
  // (default: accept everyone). With `required`, a connection must
  // authenticate before any request but ApiVersions and the SASL ones.
  // Before start().
  void set_authenticator(broker::Authenticator* authenticator, bool required) {
    authenticator_ = authenticator;
    sasl_required_ = required;
  }
  broker::Authenticator& authenticator() { return *authenticator_; }
  // The SCRAM users (SCRAM-SHA-256/512 and their administration APIs);
  // without them every SCRAM exchange fails as for an unknown user and
  // the administration APIs answer that none are kept. Before start().
  void set_scram_credentials(security::ScramCredentials* credentials) { scram_credentials_ = credentials; }
  security::ScramCredentials* scram_credentials() { return scram_credentials_; }
  // What roles may do (default: everything). Before start().
  void set_authorization(const broker::Authorization* a) { authorization_ = a; }
  const broker::Authorization& authorization() const { return *authorization_; }
  // Whether roles are checked at all (not the allow-all default): the
  // produce and fetch paths skip the check when not.
  bool authorizes() const { return authorization_ != &broker::allow_all_authorization(); }
  bool sasl_required() const { return sasl_required_; }

 private:
  runtime::Runtime& runtime_;
  broker::BrokerService& broker_;
  broker::Tenancy* tenancy_ = nullptr;
  const broker::PolicyCache* policies_ = nullptr;
  KafkaServiceOptions options_;
  broker::NamespaceName namespace_;
  std::unique_ptr<runtime::TcpListener> listener_;      // null when off
  std::unique_ptr<runtime::TcpListener> tls_listener_;  // null when off
  std::unique_ptr<GroupCoordinator> groups_;
  FetchGroups fetch_groups_;
  std::atomic<uint64_t> next_id_{1};
  // A look-up of a topic's partition count on the tenancy thread, and the
  // calls waiting for it by the reactor they came from (null: not a
  // reactor). A reactor's waiters run there, in order, before its later
  // calls for the topic, which queue behind them until they ran.
  struct PartitionsLookup {
    bool done = false;
    int32_t partitions = 0;  // once done
    std::unordered_map<runtime::Reactor*, std::vector<std::function<void(int32_t)>>> waiting;
  };
  // The look-up of `key` is done: its waiters run on their reactors.
  void finish_lookup(const std::string& key, int32_t partitions);
  // On `reactor` (or any thread for null): runs its waiters for `key`,
  // then forgets them.
  void run_waiters(const std::string& key, runtime::Reactor* reactor);

  // Runs one listing of `ns` for the requests queued for it.
  void run_listing(const broker::NamespaceName& ns);
  struct NamespaceListings {
    std::vector<TopicListingCallback> queued;  // for the listing not yet started
    std::shared_ptr<const TopicListing> last;  // the last complete one
  };
  mutable std::mutex listings_mu_;
  std::unordered_map<std::string, NamespaceListings> listings_;  // guarded by listings_mu_

  mutable std::mutex partitions_mu_;
  std::unordered_map<std::string, int32_t> partitions_;  // guarded by partitions_mu_
  std::unordered_map<std::string, PartitionsLookup> lookups_;  // guarded by partitions_mu_
  std::vector<std::unique_ptr<ProducerStates>> producer_states_;  // one per reactor, used only there
  ProducerIds producer_ids_{options_.node_id};
  broker::AllowAllAuthenticator allow_all_;
  broker::Authenticator* authenticator_ = &allow_all_;
  security::ScramCredentials* scram_credentials_ = nullptr;
  const broker::Authorization* authorization_ = &broker::allow_all_authorization();
  bool sasl_required_ = false;
};

}  // namespace magnetar::protocol::kafka
