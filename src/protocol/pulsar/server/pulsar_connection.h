// PulsarConnection: one client connection speaking the Pulsar binary
// protocol. Decodes frames, hands each command to its handler
// (handlers/*.cc) and keeps the connection's producers and consumers.
//
// Threads: lives on its connection's reactor. Work on a topic is posted to
// the topic's home reactor; its results come back through a Replier, which
// finds this connection again through a weak Link (the connection may have
// closed meanwhile).
//
// Back-pressure, as Pulsar's broker does it: SENDs awaiting their receipt
// and other requests awaiting their answer are bounded per connection (the
// service's max_pending_* options, InflightWindows). At a bound, while a
// publish rate limit holds the connection, and while the connection is not
// writable, nothing more is decoded and the socket is not read; decoding
// goes on once the connection is back at half. Outward, each consumer has
// a delivery credit at the broker (protocol/delivery_credit.h), given back
// as deliveries reach the connection and only while it is writable, so a
// client that grants permits and does not read cannot have its messages
// pile up in the connection's output.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "broker/consumer.h"
#include "broker/naming.h"
#include "broker/producer.h"
#include "broker/publish_throttle.h"
#include "broker/tenant_usage.h"
#include "protocol/delivery_credit.h"
#include "protocol/inflight_window.h"
#include "protocol/pulsar/frame.h"
#include "protocol/pulsar/server/pulsar_service.h"
#include "runtime/connection.h"
#include "runtime/replier.h"
#include "runtime/timer.h"

namespace magnetar::broker {
class Subscription;
}  // namespace magnetar::broker

namespace magnetar::protocol::pulsar {

class PulsarConnection;

// Reaches a connection from any thread (runtime/replier.h).
using ConnectionLink = runtime::HandlerLink<PulsarConnection>;
using Replier = runtime::Replier<PulsarConnection>;

// A Replier for the answer to one request: while any copy of it lives, the
// request counts among the connection's requests awaiting an answer (made
// by PulsarConnection::request_replier). Copies may be dropped on any
// thread; the count is given back on the connection's reactor. Work that
// outlives its request (a producer's on_closed) takes a plain Replier.
class RequestReplier {
 public:
  void operator()(std::function<void(PulsarConnection&)> fn) const { reply_(std::move(fn)); }

 private:
  friend class PulsarConnection;
  struct Place;
  RequestReplier(Replier reply, std::shared_ptr<Place> place) : reply_(std::move(reply)), place_(std::move(place)) {}
  Replier reply_;
  std::shared_ptr<Place> place_;
};

// Delivers a consumer's entries as MESSAGE frames. Called by the broker on
// the topic's home reactor; posts to the connection's reactor.
class PulsarConsumerSink;

class PulsarConnection final : public runtime::ConnectionHandler {
 public:
  PulsarConnection(runtime::Reactor& reactor, PulsarService& service);
  ~PulsarConnection() override;

  void on_data(runtime::Connection& conn, common::SliceChain& input) override;
  void on_writable_changed(runtime::Connection& conn, bool writable) override;
  void on_close(runtime::Connection& conn, const common::Status& reason) override;

  // --- For handlers.
  PulsarService& service() { return service_; }
  runtime::Reactor& reactor() { return reactor_; }
  void send(const proto::BaseCommand& command);
  void send_slices(common::Slice head, common::Slice entry);
  // For answers computed on other reactors.
  Replier replier() const { return Replier(link_, reactor_); }
  // For the answer to the request being dispatched, computed on other
  // reactors: counted against max_pending_requests, and against
  // max_pending_request_bytes with the bytes of its frame or, when larger,
  // `answer_bytes` (the most its answer may hold), until every copy is
  // gone.
  RequestReplier request_replier(size_t answer_bytes = 0);
  // A namespace's topic list (GET_TOPICS_OF_NAMESPACE) grows with the
  // namespace, not with its request: its answer_bytes are those of the
  // largest list this connection asked for (as listed, before a pattern
  // filters it), or before the first (whose size nothing tells) the whole
  // max_pending_request_bytes, so that one is handled alone.
  // remember_topic_list records a list's bytes.
  size_t topic_list_bytes() const { return topic_list_bytes_ > 0 ? topic_list_bytes_ : requests_.max_bytes(); }
  void remember_topic_list(size_t bytes) { topic_list_bytes_ = std::max(topic_list_bytes_, bytes); }
  // A SEND of `bytes` went to its topic / was answered (receipt or error):
  // counted against max_pending_publishes and max_pending_publish_bytes.
  // REQUIRES: every publish_started is matched by one publish_finished
  // with the same bytes while the connection lives.
  void publish_started(size_t bytes);
  void publish_finished(size_t bytes);
  std::weak_ptr<ConnectionLink> link() const { return link_; }
  bool connected() const { return connected_; }
  void set_connected() { connected_ = true; }
  void close(const common::Status& why);
  // Charges a SEND to its producer's publish limits; over a limit, the
  // connection stops reading and decoding until the limit allows more.
  void charge_publish(broker::PublishLimits& limits, int64_t messages, int64_t bytes);

  struct ProducerState {
    broker::TopicName topic;
    uint64_t broker_id;
    std::string name;
    bool ready = false;  // PRODUCER_SUCCESS (producer_ready) sent
    broker::ProducerAdmission admission{};
    std::string schema_version;  // of the schema it registered; empty without one
    std::shared_ptr<broker::PublishLimits> limits;  // its topic's publish rate limits
  };
  struct ConsumerState {
    broker::TopicName topic;
    std::string subscription;
    uint64_t broker_id;
    std::shared_ptr<PulsarConsumerSink> sink;
    DeliveryCredit credit;  // its delivery credit, as the connection counts it
  };
  std::map<uint64_t, ProducerState> producers;  // by the client's producer id
  std::map<uint64_t, ConsumerState> consumers;  // by the client's consumer id
  // Gives `consumer` back the delivery credit its deliveries used, if the
  // connection is writable (else on_writable_changed does, once it is).
  void hand_credit(ConsumerState& consumer);
  // Runs `fn(subscription, broker consumer id)` on the home reactor of
  // `consumer`'s topic, if its subscription is still there.
  void with_subscription(const ConsumerState& consumer, std::function<void(broker::Subscription&, uint64_t)> fn);
  // Detaches `consumer` from its subscription on the topic's home reactor;
  // its sink lives until then.
  void detach(const ConsumerState& consumer);
  // Writes a consumer's entries as MESSAGE frames (whether or not the
  // connection is writable: what the broker sent is bounded by the credit
  // it was given) and counts what they cost against the credit of the
  // consumer `consumer_id`, if it is still the one with `broker_id`. The
  // message ids carry `partition` (-1: the topic is not a partition).
  void deliver(uint64_t consumer_id, uint64_t broker_id, int32_t partition, std::vector<broker::Delivery>& entries);
  int32_t protocol_version = 0;
  std::string role;  // who CONNECT proved the client is (broker::Authenticator)
  // This connection counts among the connections of each tenant it has
  // produced or consumed on (TenantLimits' maxConnections), until it closes.
  std::map<std::string, broker::TenantSlot> tenant_slots;
  // OK once the connection holds a place among `tenant`'s connections
  // (taken on first use); ResourceExhausted when the tenant is full.
  common::Status use_tenant(const std::string& tenant);
  std::string client_version;     // CONNECT's client_version
  int64_t connected_since_ms = 0;  // when CONNECT was answered
  // Who this connection's producers and consumers are, for stats.
  broker::ClientInfo client_info() const;
  // The client's address ("" once closed).
  std::string peer() const;
  // The CN of the client's verified TLS certificate; "" without one.
  std::string tls_common_name() const { return conn_ != nullptr ? conn_->tls_peer_common_name() : std::string(); }

 private:
  void dispatch(Frame& frame);
  friend struct RequestReplier::Place;
  // Answers a request this broker does not serve yet with NotAllowedError.
  void refuse(uint64_t request_id, std::string_view what);
  // A RequestReplier's last copy is gone.
  void request_answered(size_t bytes);
  // Whether decoding and reading stop: a throttle hold or a full window.
  bool input_held() const { return throttle_.holding() || !publishes_.open() || !requests_.open(); }
  // Reads the socket unless the input is held.
  void update_reading();
  // Decodes the input left undecoded, from a fresh stack (after this loop
  // iteration's work), once a window reopened.
  void schedule_decode();
  void drop_all();
  // Keep-alive: a PING after an idle interval, closing the connection when
  // nothing (PONG or anything else) arrives within the next one.
  void start_keepalive();
  void keepalive_tick();

  runtime::Reactor& reactor_;
  PulsarService& service_;
  FrameDecoder decoder_;
  Frame frame_;
  runtime::Connection* conn_ = nullptr;
  common::SliceChain* input_ = nullptr;  // conn_'s input, decoded again after a throttle hold
  std::shared_ptr<ConnectionLink> link_;
  broker::PublishThrottle throttle_;
  InflightWindow publishes_;  // SENDs awaiting their receipt
  InflightWindow requests_;   // other requests awaiting their answer (RequestReplier)
  size_t frame_bytes_ = 0;    // of the frame being dispatched; 0 outside dispatch
  size_t topic_list_bytes_ = 0;  // the largest topic list listed; 0 before the first
  bool connected_ = false;  // CONNECT handled
  std::unique_ptr<runtime::Timer> keepalive_;
  bool heard_ = false;         // something arrived since the last tick
  bool awaiting_pong_ = false; // a PING went out with nothing heard since
};

class PulsarConsumerSink final : public broker::ConsumerSink {
 public:
  // `broker_id`: the broker's id of the consumer this sink feeds, unique
  // per node, which tells its deliveries from those of an earlier consumer
  // with the same client id. `partition`: the partition index of the
  // consumer's topic (-1: not a partition), which every MESSAGE's id
  // carries, as Pulsar's do.
  PulsarConsumerSink(std::weak_ptr<ConnectionLink> link, runtime::Reactor& conn_reactor, uint64_t client_consumer_id,
                     uint64_t broker_id, int32_t partition)
      : link_(std::move(link)),
        conn_reactor_(conn_reactor),
        consumer_id_(client_consumer_id),
        broker_id_(broker_id),
        partition_(partition) {}
  void deliver(std::vector<broker::Delivery> entries) override;
  void closed(const common::Status& why) override;
  void active_changed(bool active) override;

 private:
  void to_connection(std::function<void(PulsarConnection&)> fn);
  std::weak_ptr<ConnectionLink> link_;
  runtime::Reactor& conn_reactor_;
  uint64_t consumer_id_;
  uint64_t broker_id_;
  int32_t partition_;
};

// Maps a broker error to the protocol's ServerError: the one place that does.
proto::ServerError server_error(const common::Status& st);
// Why a PRODUCER or SUBSCRIBE could not load its topic, in Pulsar's terms.
proto::ServerError topic_load_error(const common::Status& st);

// --- Command handlers, one file per group (handlers/*.cc).
void handle_connect(PulsarConnection& c, const proto::CommandConnect& cmd);
void handle_lookup(PulsarConnection& c, const proto::CommandLookupTopic& cmd);
void handle_partitioned_metadata(PulsarConnection& c, const proto::CommandPartitionedTopicMetadata& cmd);
void handle_producer(PulsarConnection& c, const proto::CommandProducer& cmd);
void handle_send(PulsarConnection& c, Frame& frame);
void handle_close_producer(PulsarConnection& c, const proto::CommandCloseProducer& cmd);
void handle_subscribe(PulsarConnection& c, const proto::CommandSubscribe& cmd);
void handle_flow(PulsarConnection& c, const proto::CommandFlow& cmd);
void handle_ack(PulsarConnection& c, const proto::CommandAck& cmd);
void handle_redeliver(PulsarConnection& c, const proto::CommandRedeliverUnacknowledgedMessages& cmd);
void handle_close_consumer(PulsarConnection& c, const proto::CommandCloseConsumer& cmd);
void handle_unsubscribe(PulsarConnection& c, const proto::CommandUnsubscribe& cmd);
void handle_get_last_message_id(PulsarConnection& c, const proto::CommandGetLastMessageId& cmd);
void handle_seek(PulsarConnection& c, const proto::CommandSeek& cmd);
void handle_consumer_stats(PulsarConnection& c, const proto::CommandConsumerStats& cmd);
void handle_get_topics_of_namespace(PulsarConnection& c, const proto::CommandGetTopicsOfNamespace& cmd);
void handle_get_schema(PulsarConnection& c, const proto::CommandGetSchema& cmd);
void handle_get_or_create_schema(PulsarConnection& c, const proto::CommandGetOrCreateSchema& cmd);
// The schema a producer or consumer brings (handlers/schema.cc): registers
// it and calls `then` on this connection's reactor with its wire version.
void register_schema(PulsarConnection& c, const broker::TopicName& topic, const proto::Schema& schema,
                     std::function<void(PulsarConnection&, common::Result<std::string>)> then);

}  // namespace magnetar::protocol::pulsar
