// KafkaConnection: one client connection speaking the Kafka protocol. Cuts
// size-prefixed requests off the input, decodes each with its API's schema
// and hands it to its handler (handlers/*.cc, one file per API).
//
// Responses leave in request order: every request takes a slot when it
// arrives and its response waits in its slot until the ones before it were
// written. A request that cannot be decoded closes this connection only.
//
// Back-pressure: the slots not yet written are bounded (the service's
// max_inflight_requests and max_inflight_bytes, an InflightWindow). At the
// bound, while a publish rate limit holds the connection, and while the
// connection is not writable, nothing more is decoded and the socket is not
// read; the client's requests wait in the kernel and TCP holds the client
// back. Decoding goes on when the window is back at half. A slot counts
// the most its response may hold where that is known up front (a Fetch's
// MaxBytes, a Metadata response as large as this connection's largest so
// far; the first counts as the whole bytes bound, so it is handled alone),
// and a response that waits behind an earlier one counts its actual size
// when that is larger.
//
// Threads: lives on its connection's reactor. Handlers post topic work to
// the topic's home reactor and answer through replier(), which finds this
// connection again through a weak link (it may have closed meanwhile).
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "broker/client_info.h"
#include "broker/publish_throttle.h"
#include "broker/tenant_usage.h"
#include "protocol/inflight_window.h"
#include "protocol/kafka/header.h"
#include "protocol/kafka/messages.h"
#include "protocol/kafka/schema.h"
#include "protocol/kafka/server/kafka_service.h"
#include "runtime/connection.h"
#include "runtime/replier.h"
#include "runtime/timer.h"

namespace magnetar::protocol::kafka {

class KafkaConnection;

// Reaches a connection from any thread (runtime/replier.h).
using KafkaLink = runtime::HandlerLink<KafkaConnection>;
using KafkaReplier = runtime::Replier<KafkaConnection>;

// One decoded request.
struct Request {
  RequestHeader header;
  const ApiSpec* api = nullptr;
  uint64_t slot = 0;
  Struct body;

  int16_t version() const { return header.api_version; }
  // An empty response of this request's API, to fill in.
  Struct response() const { return Struct(*api->response); }
};

class KafkaConnection final : public runtime::ConnectionHandler {
 public:
  KafkaConnection(runtime::Reactor& reactor, KafkaService& service);
  ~KafkaConnection() override;

  void on_data(runtime::Connection& conn, common::SliceChain& input) override;
  void on_close(runtime::Connection& conn, const common::Status& reason) override;

  // --- For handlers.
  KafkaService& service() { return service_; }
  runtime::Reactor& reactor() { return reactor_; }
  KafkaReplier replier() const { return KafkaReplier(link_, reactor_); }
  // The port Metadata and FindCoordinator name: the listener this client
  // came in on (the TLS one or the plaintext one).
  uint16_t advertised_port() const {
    return conn_ != nullptr && conn_->tls() ? service_.tls_port() : service_.port();
  }
  // The client's address as Kafka shows it ("/<ip>:<port>").
  std::string peer_host() const;
  // Who this client is, for the producers it registers (topic stats show
  // protocol "kafka", its address and its client id).
  broker::ClientInfo client_info(const RequestHeader& header) const;
  // Encodes `response` at the request's version into its slot.
  void respond(const Request& request, const Struct& response);
  // Bytes that answer no request (the reply to a bare SASL token), after
  // the responses before them.
  void respond_raw(common::Slice bytes);
  // The next message is a bare SASL token (after SaslHandshake v0).
  void expect_raw_sasl_token() { raw_sasl_next_ = true; }
  // The request gets no response (Produce with acks=0): frees its slot.
  void respond_none(const Request& request);
  void close(const common::Status& why);
  // The namespace this connection's topics live in: the listener's
  // default, or the one its SASL/PLAIN user name chose.
  const broker::NamespaceName& ns() const { return ns_ ? *ns_ : service_.default_namespace(); }
  common::Result<broker::TopicName> topic_for(const std::string& name) const { return service_.topic_for(ns(), name); }
  // Runs `fn` with the partition's topic once this connection's role may
  // do `action` on it (PermissionDenied, which answers
  // TOPIC_AUTHORIZATION_FAILED, otherwise).
  // With `create` false a missing topic is not created (KafkaService::with_partition).
  void with_partition(const std::string& topic, int32_t partition, broker::TopicAction action,
                      ledger::Callback<common::Result<broker::Topic*>> fn, bool create = true);
  // OK when this connection's role may do `action` on Kafka topic `topic`.
  common::Status authorize(const std::string& topic, broker::TopicAction action) const;
  // Consumer groups belong to the connection's namespace: the coordinator
  // knows a group as "tenant/namespace/group", the client by its own name.
  // An empty name stays empty (INVALID_GROUP_ID).
  std::string group_key(const std::string& group) const;
  // The client's name of a coordinator key; nullopt for another namespace's.
  std::optional<std::string> group_name(const std::string& key) const;
  // May this connection's role use `group` (the namespace's subscription
  // rules: a group's offsets are subscriptions named after it)?
  common::Status authorize_group(const std::string& group) const;
  // The group this connection's consumer joined or heartbeated for (the
  // client's name); a JoinGroup also tells the service (fetch_groups.h).
  void set_fetch_group(const std::string& group, const RequestHeader& header);
  // The group a Fetch with `header` reads for: the one joined on this
  // connection, else the one the service knows for this client id and
  // host; "" when none (a Fetch names no group).
  const std::string& fetch_group(const RequestHeader& header);
  // SASL: the mechanism the handshake chose, then the role and namespace
  // authentication gave.
  void set_sasl_mechanism(std::string mechanism) { sasl_mechanism_ = std::move(mechanism); }
  const std::string& sasl_mechanism() const { return sasl_mechanism_; }
  void authenticated(std::string role, std::optional<broker::NamespaceName> ns) {
    role_ = std::move(role);
    authenticated_ = true;
    if (ns) ns_ = std::move(ns);
  }
  bool is_authenticated() const { return authenticated_; }
  // The SCRAM exchange under way after a SCRAM handshake; null otherwise.
  std::unique_ptr<security::ScramServerExchange>& scram_exchange() { return scram_exchange_; }
  const std::string& role() const { return role_; }

  // A Fetch waiting for data: `retry` runs on this connection's reactor
  // when a topic it reads stores an entry (wake_fetches), or at `deadline`
  // (its max wait), whichever comes first.
  void park_fetch(std::chrono::steady_clock::time_point deadline, std::function<void()> retry);
  // Retries every parked Fetch now.
  void wake_fetches();
  // Runs `fn` on this connection's reactor at `deadline`, unless the
  // connection closed or cancel(id) came first; returns that id.
  uint64_t at(std::chrono::steady_clock::time_point deadline, std::function<void()> fn);
  void cancel(uint64_t deadline_id);
  // How many wake-ups came so far: a Fetch whose attempt saw one come
  // before it parked looks again at once instead of waiting.
  uint64_t wakes() const { return wakes_; }
  // The key this connection's waiters use on topics (Topic::when_entries_added).
  const void* waiter_key() const { return link_.get(); }

  // The broker-side producer id and name this connection publishes with on
  // Kafka (topic, partition), made on first use.
  std::pair<uint64_t, std::string> producer_for(const std::string& topic, int32_t partition);
  // Producer `id` is registered on `topic`: removed from it when this
  // connection closes.
  void producer_on(uint64_t id, const broker::TopicName& topic) { producer_topics_[id] = topic; }
  // The publish limits of (topic, partition) once a Produce to it learnt
  // them; null before. Charged here, as the request is decoded, so that a
  // read holding many requests stops at the one that overdraws.
  broker::PublishLimits* publish_limits_for(const std::string& topic, int32_t partition);
  void remember_publish_limits(const std::string& topic, int32_t partition,
                               std::shared_ptr<broker::PublishLimits> limits);
  // Charges a publish; over a limit, holds the input as hold_input does.
  void charge_publish(broker::PublishLimits& limits, int64_t messages, int64_t bytes);
  // A publish went over a publish rate limit: stop reading and decoding
  // requests for `wait_ns` (Kafka's quota: the connection is muted).
  void hold_input(int64_t wait_ns);
  // What Produce answers as ThrottleTimeMs: the rest of the current hold.
  int64_t throttle_time_ms() const { return throttle_.remaining().count(); }
  // A Produce that gets a response started (produce_waits) or was answered
  // (produce_answered). On a cluster member, while any waits, the
  // connection looks at the member's lease every second
  // (let_go_on_lapsed_lease).
  void produce_waits();
  void produce_answered() { --produces_waiting_; }
  // Closes the connection, and says so, when this member's lease lapsed
  // and its client produces here (a produce waits, or it produced before;
  // Metadata asks too). The member was counted dead and its topics are
  // being taken over, so it cannot acknowledge them, and a client
  // (librdkafka) asks for metadata only over connections that are up: kept,
  // it would keep asking this member, which cannot name the new owner. A
  // client that never produced here (a lone survivor's Metadata clients) is
  // kept.
  bool let_go_on_lapsed_lease();
  // Sequence ids for the entries this connection publishes.
  uint64_t next_sequence(uint64_t messages) {
    uint64_t s = sequence_;
    sequence_ += messages;
    return s;
  }

 private:
  void handle_request(common::Slice message);
  void dispatch(Request& request);
  // A slot for a request of `bytes` (0: bytes that answer none), counted
  // in window_.
  uint64_t open_slot(size_t bytes);
  void flush();
  // Reads the socket unless the throttle holds the input or the window
  // is closed.
  void update_reading();
  // Decodes the input left undecoded, from a fresh stack (after this
  // loop iteration's work), once the window reopened.
  void schedule_decode();
  void on_deadline();
  void arm_timer();
  void watch_lease();

  runtime::Reactor& reactor_;
  KafkaService& service_;
  runtime::Connection* conn_ = nullptr;
  common::SliceChain* input_ = nullptr;  // conn_'s input, decoded again after a throttle hold
  std::shared_ptr<KafkaLink> link_;
  broker::PublishThrottle throttle_;
  // Responses not yet written, in request order.
  struct Slot {
    uint64_t id;
    size_t bytes;                            // the request's, as counted in window_
    std::optional<common::Slice> response;  // empty: still being computed
  };
  std::deque<Slot> pending_;
  InflightWindow window_;
  // What a request may make the connection hold until it is answered
  // (counted in window_ for its slot).
  size_t window_charge(const Request& request, size_t bytes) const;
  // The largest Metadata response this connection sent; 0 before the
  // first. A namespace's topic list makes Metadata's the one response
  // that grows with what the node holds rather than with the request.
  size_t metadata_response_bytes_ = 0;
  uint64_t next_slot_ = 0;
  std::map<std::string, std::pair<uint64_t, std::string>> producers_;  // by "<topic>/<partition>"
  std::map<uint64_t, broker::TopicName> producer_topics_;             // where each one is registered
  // By topic, then partition: a Produce looks them up without building a key.
  std::map<std::string, std::map<int32_t, std::shared_ptr<broker::PublishLimits>>> publish_limits_;
  uint64_t sequence_ = 0;
  uint32_t produces_waiting_ = 0;  // Produce requests not yet answered (acks 1 or all)
  bool watching_lease_ = false;    // watch_lease() is due
  std::optional<broker::NamespaceName> ns_;
  std::string sasl_mechanism_;
  std::string fetch_group_;
  bool joined_here_ = false;         // fetch_group_ was joined on this connection
  uint64_t fetch_groups_seen_ = 0;   // the service's FetchGroups version fetch_group_ was read at
  std::string role_;
  bool authenticated_ = false;
  // Its place among the connections of its namespace's tenant (TenantLimits'
  // maxConnections), taken at its first request past the handshake.
  std::optional<broker::TenantSlot> tenant_slot_;
  bool raw_sasl_next_ = false;
  std::unique_ptr<security::ScramServerExchange> scram_exchange_;
  std::unique_ptr<runtime::Timer> timer_;  // parked_'s and deadlines_' earliest
  uint64_t wakes_ = 0;
  int64_t connected_since_ms_ = 0;
  std::vector<std::pair<std::chrono::steady_clock::time_point, std::function<void()>>> parked_;
  struct Deadline {
    std::chrono::steady_clock::time_point at;
    uint64_t id;
    std::function<void()> fn;
  };
  std::vector<Deadline> deadlines_;  // at()'s, in no order
  uint64_t deadline_ids_ = 0;
};

// --- API handlers, one file each (handlers/*.cc).
void handle_api_versions(KafkaConnection& c, const Request& request);
// The answer to an ApiVersions request at a version we do not serve: error
// UNSUPPORTED_VERSION with the served versions, in v0 layout (KIP-511).
void answer_unsupported_api_versions(KafkaConnection& c, const Request& request);
void handle_metadata(KafkaConnection& c, const Request& request);
void handle_produce(KafkaConnection& c, const Request& request);
void handle_fetch(KafkaConnection& c, const Request& request);
void handle_list_offsets(KafkaConnection& c, const Request& request);
void handle_find_coordinator(KafkaConnection& c, const Request& request);
// Runs `handle` when this member coordinates the request's group (any
// member that is standalone); a cluster member that does not answers
// NOT_COORDINATOR, on which clients find the coordinator again.
void on_group_coordinator(KafkaConnection& c, const Request& request,
                          void (*handle)(KafkaConnection&, const Request&));
void handle_join_group(KafkaConnection& c, const Request& request);
void handle_sync_group(KafkaConnection& c, const Request& request);  // in join_group.cc
void handle_heartbeat(KafkaConnection& c, const Request& request);
void handle_leave_group(KafkaConnection& c, const Request& request);  // in heartbeat.cc
void handle_offset_commit(KafkaConnection& c, const Request& request);
void handle_offset_fetch(KafkaConnection& c, const Request& request);
void handle_list_groups(KafkaConnection& c, const Request& request);
void handle_describe_groups(KafkaConnection& c, const Request& request);  // in list_groups.cc
void handle_delete_groups(KafkaConnection& c, const Request& request);
void handle_create_topics(KafkaConnection& c, const Request& request);       // topic_admin.cc
void handle_delete_topics(KafkaConnection& c, const Request& request);       // topic_admin.cc
void handle_create_partitions(KafkaConnection& c, const Request& request);   // topic_admin.cc
void handle_describe_configs(KafkaConnection& c, const Request& request);
// Adds this broker and every other live member serving Kafka to `resp`'s
// "Brokers", each id in `id_field` (Metadata's NodeId, DescribeCluster's
// BrokerId). Returns the ids it listed.
std::vector<int64_t> add_brokers(KafkaConnection& c, Struct& resp, const char* id_field);
void handle_init_producer_id(KafkaConnection& c, const Request& request);
void handle_describe_cluster(KafkaConnection& c, const Request& request);
void handle_alter_configs(KafkaConnection& c, const Request& request);              // alter_configs.cc
void handle_incremental_alter_configs(KafkaConnection& c, const Request& request);  // alter_configs.cc
void handle_delete_records(KafkaConnection& c, const Request& request);
void handle_offset_delete(KafkaConnection& c, const Request& request);
void handle_offset_for_leader_epoch(KafkaConnection& c, const Request& request);
void handle_describe_log_dirs(KafkaConnection& c, const Request& request);
void handle_describe_producers(KafkaConnection& c, const Request& request);
// Topic and config administration is for the tenant's admins (and
// superusers); PermissionDenied otherwise. In topic_admin.cc.
common::Status may_administer(KafkaConnection& c);
void handle_sasl_handshake(KafkaConnection& c, const Request& request);      // sasl.cc
void handle_sasl_authenticate(KafkaConnection& c, const Request& request);   // sasl.cc
void handle_raw_sasl_token(KafkaConnection& c, common::Slice token);        // sasl.cc
void handle_describe_user_scram_credentials(KafkaConnection& c, const Request& request);  // scram_credentials.cc
void handle_alter_user_scram_credentials(KafkaConnection& c, const Request& request);     // scram_credentials.cc

}  // namespace magnetar::protocol::kafka
