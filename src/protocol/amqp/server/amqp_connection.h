// AmqpConnection: one client connection speaking AMQP 0-9-1. Checks the
// protocol header, runs the handshake (start, tune, open), then cuts frames
// off the input, decodes each method with the method table and hands it to
// its handler (handlers/*.cc, one file per class). Content (a header frame
// and body frames) is gathered behind the basic.publish it belongs to.
//
// Errors: a channel exception (reply codes 3xx-4xx) sends channel.close and
// ignores the channel's frames until channel.close-ok; a connection
// exception (5xx: bad framing, frame-max exceeded, unknown classes or
// methods, malformed arguments, frames out of order) sends connection.close
// and closes the socket on close-ok or after a grace period. Neither affects
// other connections or what is stored.
//
// Heartbeats: when negotiated, a heartbeat frame goes out whenever nothing
// else was sent for half the interval, and the connection closes when the
// client sent nothing for two intervals.
//
// Threads: lives on its connection's reactor. Topic work runs on the topic's
// home reactor and answers through replier(), which finds this connection
// again through a weak link (it may have closed meanwhile). Work for a
// channel carries the channel's serial number, so an answer for a channel
// that closed (or was reopened under the same number) is dropped.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "broker/client_info.h"
#include "broker/consumer.h"
#include "broker/publish_throttle.h"
#include "broker/tenant_usage.h"
#include "protocol/amqp/errors.h"
#include "protocol/amqp/frame.h"
#include "protocol/amqp/methods.h"
#include "protocol/amqp/properties.h"
#include "protocol/amqp/server/amqp_service.h"
#include "protocol/amqp/server/queue_limits.h"
#include "protocol/amqp/server/remote_consumers.h"
#include "protocol/inflight_window.h"
#include "runtime/connection.h"
#include "runtime/replier.h"
#include "runtime/timer.h"

namespace magnetar::protocol::amqp {

class AmqpConnection;
class AmqpConsumerSink;
using AmqpLink = runtime::HandlerLink<AmqpConnection>;
using AmqpReplier = runtime::Replier<AmqpConnection>;

// A channel exception or connection exception to raise: the reply code and
// text, and the method that caused it.
struct AmqpError {
  uint16_t code = 0;
  std::string text;
  uint32_t method = 0;  // method_key of the cause; 0 when none
};

struct QueueConsumer;

// A consumer of a priority queue (x-max-priority) reads every level's topic
// with a QueueConsumer of its own (the same tag; level 0 is the one the
// channel knows). What the levels receive waits here and goes to the client
// highest level first, while the client has room under the prefetch count
// (AmqpConnection::pump). Each level's permits bound what waits.
struct PriorityGroup {
  std::vector<std::shared_ptr<QueueConsumer>> levels;  // by level; cleared once detached
  std::vector<std::deque<broker::Delivery>> waiting;    // by level
  uint32_t prefetch = 0;   // 0: unlimited
  uint32_t in_client = 0;  // delivered and not yet settled (manual acks)
};

// One consumer on a queue: a basic.consume, or the channel's puller for
// basic.get on that queue. Shared with the deliveries it made.
struct QueueConsumer {
  std::string tag;  // the consumer tag; empty for a puller
  std::string queue;
  broker::TopicName topic;
  uint64_t broker_id = 0;
  bool no_ack = false;
  bool cancelled = false;
  // x-single-active-consumer: the queue's subscription is Failover, so the
  // first consumer attached gets everything until it leaves.
  bool single_active = false;
  // Deliveries the client holds unacknowledged (ack mode) and permits the
  // broker still has for it.
  uint32_t prefetch = 0;  // 0: unlimited
  bool window_from_global = false;  // prefetch is the channel's basic.qos global count
  std::shared_ptr<AmqpConsumerSink> sink;
  // The queue's limits (queue_limits.h), when it has any or is auto-delete.
  std::shared_ptr<const QueueRef> limits;
  // The broker subscription it reads: the queue's Shared "amqp", or for a
  // stream queue a reader of its own (non-durable), starting where its
  // x-stream-offset says; messages before `skip_below` in its first entry
  // are passed over (an offset inside a batch).
  std::string subscription = queue_subscription();
  bool stream = false;
  StreamStart start{};
  int64_t skip_below = 0;
  // A priority queue's: the consumer's levels, and which one this is.
  std::shared_ptr<PriorityGroup> group;
  uint8_t level = 0;
  // Set when another cluster member owns the topic: the session there
  // (remote_consumers.h). Set on the connection's reactor before the
  // consumer's first permits.
  std::shared_ptr<RemoteSession> remote;
};

// A message delivered and not yet acknowledged.
struct Unacked {
  std::shared_ptr<QueueConsumer> consumer;
  ledger::Position position;
  uint32_t batch_index = 0;
  uint32_t batch_size = 1;  // messages in the entry
  // Kept when the queue dead-letters, for a reject without requeue.
  std::shared_ptr<const AmqpMessage> message;
};

struct Channel {
  ChannelGauge counted;
  uint16_t id = 0;
  uint64_t serial = 0;  // unique per connection: answers check it
  bool closing = false; // sent channel.close, waiting for close-ok
  // A basic.publish waiting for its content header and body.
  std::optional<Method> publishing;
  std::optional<ContentHeader> header;
  std::vector<common::Slice> body;
  uint64_t body_received = 0;
  struct Deferred {
    Method method;
    std::optional<ContentHeader> header;  // set for a basic.publish with its content
    common::Slice body;
  };
  // Publisher confirms: the sequence number of the last publish, and the
  // outcome of each from confirm_base on not yet sent (AmqpConnection::
  // settle_confirm); bounded by the publishes a connection may have in
  // flight.
  enum class Confirm : uint8_t { kPending, kAck, kNack };
  bool confirm = false;
  uint64_t publish_seq = 0;
  uint64_t confirm_base = 1;
  std::deque<Confirm> confirms;
  bool confirms_flush_queued = false;
  bool tx = false;
  // tx.select: publishes and settlements wait here for tx.commit (or are
  // dropped by tx.rollback), counted against the connection's bounds on
  // what transactions hold (AmqpConnection::hold_in_tx).
  std::vector<Deferred> tx_publishes;
  std::vector<Method> tx_settles;
  size_t tx_bytes = 0;  // tx_publishes' bodies
  uint16_t prefetch = 0;   // basic.qos prefetch-count for new consumers
  uint16_t global_prefetch = 0;  // basic.qos global: unacknowledged deliveries of the whole channel
  std::string last_queue;  // the queue last declared: what "" names
  uint64_t next_delivery_tag = 1;
  std::map<std::string, std::shared_ptr<QueueConsumer>> consumers;  // by tag
  std::map<std::string, std::shared_ptr<QueueConsumer>> pullers;    // by queue
  std::map<uint64_t, Unacked> unacked;                             // by delivery tag
  struct PendingGet {
    std::string queue;
    bool no_ack = false;
    uint64_t message_count = 0;  // ready messages after the one it gets
  };
  std::deque<PendingGet> gets;  // basic.get waiting for a message (one puller each)
  // Publishes of this channel not yet stored. Methods that could observe
  // them (everything but basic.publish and acknowledgements) wait until
  // they are, in `deferred`, so a client sees its own publishes; once one
  // method waits, everything after it waits too, in order.
  uint32_t publishes_in_flight = 0;
  std::deque<Deferred> deferred;
  // channel.flow: while false, deliveries for this channel wait here (at
  // most what the consumers' permits let through) until it is true again.
  bool flow_active = true;
  std::vector<std::pair<std::shared_ptr<QueueConsumer>, std::vector<broker::Delivery>>> held;
  // basic.qos global: deliveries past global_prefetch unacknowledged wait
  // here, in arrival order, until acknowledgements make room
  // (AmqpConnection::release_gated); each consumer's permits bound them.
  std::deque<std::pair<std::shared_ptr<QueueConsumer>, std::vector<broker::Delivery>>> gated;
  // Answers get-empty when a message seen ready went to another consumer.
  std::unique_ptr<runtime::Timer> get_timer;
};

// Runs work on a channel's connection, from any thread, if that channel is
// still open (the same serial): answers to asynchronous steps use it.
class ChannelReplier {
 public:
  ChannelReplier(AmqpReplier reply, uint16_t channel, uint64_t serial)
      : reply_(std::move(reply)), channel_(channel), serial_(serial) {}
  void operator()(std::function<void(AmqpConnection&, Channel&)> fn) const;

 private:
  AmqpReplier reply_;
  uint16_t channel_;
  uint64_t serial_;
};

class AmqpConnection final : public runtime::ConnectionHandler {
 public:
  AmqpConnection(runtime::Reactor& reactor, AmqpService& service);
  ~AmqpConnection() override;

  void on_data(runtime::Connection& conn, common::SliceChain& input) override;
  void on_writable_changed(runtime::Connection& conn, bool writable) override;
  void on_close(runtime::Connection& conn, const common::Status& reason) override;

  // --- For handlers.
  AmqpService& service() { return service_; }
  runtime::Reactor& reactor() { return reactor_; }
  AmqpReplier replier() const { return AmqpReplier(link_, reactor_); }
  ChannelReplier replier(const Channel& ch) const { return ChannelReplier(replier(), ch.id, ch.serial); }
  // Sends `key` on the channel unless the method asked for no answer
  // (its no-wait bit).
  void answer(Channel& ch, const Method& request, const Method& reply);
  std::weak_ptr<AmqpLink> link() const { return link_; }
  uint64_t id() const { return id_; }
  const broker::NamespaceName& vhost() const { return vhost_; }
  // The vhost as clients name it ("/" for public/default), for messages.
  std::string vhost_name() const;
  uint32_t frame_max() const { return frame_max_; }
  // Who this client is, for the stats of its producers and consumers:
  // protocol "amqp", its address, the product and version it announced.
  const broker::ClientInfo& client_info() const { return client_info_; }

  void send(common::Slice bytes);
  void send_method(uint16_t channel, const Method& m) { send(method_frame(channel, m)); }
  // A method with content: the method, header and body frames cut to
  // frame-max.
  void send_with_content(uint16_t channel, const Method& m, const common::Slice& properties,
                         const common::Slice& body);
  // Raises a channel exception on `channel` (or a connection exception for
  // codes >= 500).
  void channel_error(Channel& ch, const AmqpError& e);
  // Whether this connection's role may do `action` on queue topic `topic`;
  // when not, the channel is closed with 403 ACCESS_REFUSED (method `key`).
  bool authorized(Channel& ch, const broker::TopicName& topic, broker::TopicAction action, uint32_t key);
  // The same for the vhost's own grants (exchanges, exchange bindings), and
  // for what only the vhost's tenant admins may do (deleting shared things).
  bool authorized_in_vhost(Channel& ch, broker::TopicAction action, uint32_t key);
  bool authorized_admin(Channel& ch, uint32_t key);
  void connection_error(const AmqpError& e);
  // The open channel with this number and serial, or null.
  Channel* channel(uint16_t id, uint64_t serial);
  // The producer id this connection publishes with, on every topic (each
  // registers it on first use; it leaves them when this connection closes).
  uint64_t producer_for_all(const std::vector<broker::TopicName>& topics);
  // Charges one message of `bytes` to each topic's publish limits (after
  // producer_for_all): over a limit, the connection stops reading and
  // decoding until the limit allows more (RabbitMQ's flow control does
  // the same).
  void charge_publish(const std::vector<broker::TopicName>& topics, int64_t bytes);
  const std::string& producer_name() const { return producer_name_; }
  uint64_t next_sequence() { return sequence_++; }

  // Publishes in flight (of `bytes` each): reading pauses past a bound and
  // resumes below half; a channel's deferred methods run once its
  // publishes are stored.
  void publish_started(Channel& ch, size_t bytes);
  // Publisher confirms: the next publish's sequence number (its outcome
  // pending), and one publish settled. Outcomes go out once per loop
  // iteration in publish order, consecutive acks as one basic.ack with
  // `multiple`, as RabbitMQ coalesces them; one settled ahead of an earlier
  // one still pending waits for it.
  uint64_t next_confirm(Channel& ch);
  void settle_confirm(Channel& ch, uint64_t seq, bool ok);
  void publish_finished(uint16_t channel, uint64_t serial, size_t bytes);
  // A publish on a channel without confirms was not stored: counted
  // (AmqpMetrics::unconfirmed_publish_failures) and logged at warn, at most
  // once per kFailureLogInterval per connection with how many failed since,
  // so a storage outage under a fast publisher does not flood the log.
  void unconfirmed_publish_failed(const std::string& exchange, const std::string& routing_key,
                                  const common::Status& why);
  static constexpr std::chrono::seconds kFailureLogInterval{10};
  // Queues `d` behind the channel's publishes in flight; what waits counts
  // against the same bound as the publishes.
  void defer(Channel& ch, Channel::Deferred d);
  // Room in the channel's transaction for one more publish of `bytes` (or
  // acknowledgement, 0 bytes) within the connection's bounds on what its
  // transactions hold (the service's max_tx_messages and max_tx_bytes).
  // True: counted, and the caller adds it to the channel's tx_publishes or
  // tx_settles. False: the channel was closed (406, method `key`).
  bool hold_in_tx(Channel& ch, size_t bytes, uint32_t key);
  // What the channel's transaction held, taken out of it and out of the
  // connection's count (tx.commit, tx.rollback, the channel closing).
  std::pair<std::vector<Channel::Deferred>, std::vector<Method>> take_tx(Channel& ch);

  // Called (on this reactor) with entries a consumer's sink received.
  void deliver(uint16_t channel, uint64_t serial, const std::shared_ptr<QueueConsumer>& consumer,
               std::vector<broker::Delivery> entries);
  // basic.qos global: delivers what waits in the channel's gate while it
  // has room (after acknowledgements, or a changed limit), and what its
  // priority consumers hold.
  void release_gated(Channel& ch);
  // A priority consumer: delivers what its levels hold, highest first,
  // while the client has room under its prefetch and the channel's.
  void pump(Channel& ch, PriorityGroup& group);
  // The broker detached a consumer (its queue deleted).
  void consumer_closed(uint16_t channel, uint64_t serial, const std::shared_ptr<QueueConsumer>& consumer);
  // Detaches a consumer from its subscription; what it held unacknowledged
  // goes back to the queue.
  void detach(const std::shared_ptr<QueueConsumer>& consumer);
  // Forgets a basic.consume consumer in its queue's consumer count.
  void uncount(const QueueConsumer& consumer);
  // Gives the broker `n` more permits for `consumer`.
  void grant(const std::shared_ptr<QueueConsumer>& consumer, uint32_t n);
  // Exclusive queues this connection declared (deleted when it closes).
  std::set<std::string>& exclusive_queues() { return exclusive_queues_; }

 private:
  void flush_confirms(Channel& ch);
  // Writes a consumer's entries to the client (past flow and the gate).
  void deliver_entries(Channel& ch, const std::shared_ptr<QueueConsumer>& consumer,
                       std::vector<broker::Delivery> entries);
  enum class State { kHeader, kStartOk, kTuneOk, kOpen, kOpening, kOpened, kClosing };

  bool refused_unless(Channel& ch, const common::Status& allowed, uint32_t key);
  void handle_frame(Frame& frame);
  void handle_method(uint16_t channel, Method& method);
  void handle_channel_method(Channel& ch, Method& method);
  void run_channel_method(Channel& ch, Method& method);
  // Runs the channel's deferred methods that may run now.
  void replay(uint16_t channel, uint64_t serial);
  // Reads and decodes again once held_ is back at half (and no throttle
  // holds the input); the decoding runs from a fresh stack.
  void maybe_resume();
  void handle_content_frame(Frame& frame);
  // handlers/connection.cc: the connection class.
  void send_start();
  void handshake(const Method& method);
  void start_heartbeats();
  void heartbeat_tick();
  void close_channel(Channel& ch);
  void finish_close();

  runtime::Reactor& reactor_;
  AmqpService& service_;
  const uint64_t id_;
  const uint64_t producer_id_;
  runtime::Connection* conn_ = nullptr;
  common::SliceChain* input_ = nullptr;  // the connection's input, for resuming after a pause
  std::shared_ptr<AmqpLink> link_;
  State state_ = State::kHeader;
  broker::NamespaceName vhost_;
  std::string role_;
  broker::ClientInfo client_info_;
  uint16_t channel_max_ = 0;
  uint32_t frame_max_ = kDefaultFrameMax;
  uint16_t heartbeat_secs_ = 0;
  std::unique_ptr<runtime::Timer> heartbeat_;
  std::unique_ptr<runtime::Timer> close_timer_;
  bool heard_ = false;  // something arrived since the last tick
  int silent_ticks_ = 0;
  bool sent_ = false;   // something went out since the last tick
  std::map<uint16_t, Channel> channels_;
  uint64_t next_serial_ = 1;
  std::string producer_name_;
  // By the topic's local name (every queue topic is in vhost_), so a publish
  // looks them up without building a name.
  std::map<std::string, broker::TopicName, std::less<>> producer_topics_;  // where producer_id_ may be registered
  std::map<std::string, std::shared_ptr<broker::PublishLimits>, std::less<>> publish_limits_;
  uint64_t sequence_ = 0;
  size_t publishes_in_flight_ = 0;
  // What the channels' transactions hold: publishes and acknowledgements,
  // and the publishes' body bytes (hold_in_tx, take_tx).
  size_t tx_held_ = 0;
  size_t tx_held_bytes_ = 0;
  // Publishes in flight and what channels deferred behind them, with their
  // bodies' bytes: at the bound reading pauses (paused_) until half.
  InflightWindow held_;
  bool paused_ = false;
  broker::PublishThrottle throttle_;
  bool close_after_publishes_ = false;  // connection.close-ok waits for publishes in flight
  std::vector<std::pair<std::shared_ptr<QueueConsumer>, uint32_t>> held_grants_;  // while not writable
  std::set<std::string> exclusive_queues_;
  broker::TenantSlot tenant_slot_;  // among its vhost's tenant's connections
  // Unconfirmed publishes that failed since the last warning, and when that was.
  uint64_t failures_not_logged_ = 0;
  std::optional<std::chrono::steady_clock::time_point> last_failure_log_;
};

class AmqpConsumerSink final : public broker::ConsumerSink {
 public:
  AmqpConsumerSink(std::weak_ptr<AmqpLink> link, runtime::Reactor& conn_reactor, uint16_t channel, uint64_t serial)
      : link_(std::move(link)), conn_reactor_(conn_reactor), channel_(channel), serial_(serial) {}
  // Set once the consumer exists (it holds this sink).
  void attach(std::weak_ptr<QueueConsumer> consumer) { consumer_ = std::move(consumer); }
  void deliver(std::vector<broker::Delivery> entries) override;
  void closed(const common::Status& why) override;

 private:
  std::weak_ptr<AmqpLink> link_;
  runtime::Reactor& conn_reactor_;
  uint16_t channel_;
  uint64_t serial_;
  std::weak_ptr<QueueConsumer> consumer_;
};

// --- Method handlers, one file per class (handlers/*.cc). Each runs on the
// connection's reactor for an open channel.
void handle_exchange(AmqpConnection& c, Channel& ch, const Method& m);
void handle_queue(AmqpConnection& c, Channel& ch, const Method& m);
// After `removed` bindings went: drops auto-delete exchanges left without
// bindings (in exchange.cc), durably for durable ones.
void drop_unused_auto_delete(Topology& t, AmqpService::Persist& persist, std::vector<Binding> removed);
// exchange.bind/unbind and queue.bind/unbind (in exchange.cc): checks both
// ends, adds or removes `b` (durably when both ends are durable) and
// answers `reply`.
void change_binding(AmqpConnection& c, Channel& ch, const Method& m, Binding b, bool add, const Method& reply);
// basic.publish's content is complete.
void handle_publish(AmqpConnection& c, Channel& ch, const Method& publish, const ContentHeader& header,
                    common::Slice body);
void handle_confirm_tx(AmqpConnection& c, Channel& ch, const Method& m);
void handle_consume(AmqpConnection& c, Channel& ch, const Method& m);   // qos, consume, cancel, get
void handle_ack(AmqpConnection& c, Channel& ch, const Method& m);       // ack, nack, reject, recover
// Runs fn(subscription, broker consumer id) on the consumer's topic home,
// if the topic is loaded and the queue's subscription is there.
void on_subscription(AmqpService& service, const std::shared_ptr<QueueConsumer>& consumer,
                     std::function<void(broker::Subscription&, uint64_t)> fn);
// A stream consumer's reader starts after `start_after` (none: at the
// initial position); a start inside a batch entry passes over the messages
// before it (QueueConsumer::skip_below).
using StartAt = std::function<void(std::optional<ledger::Position> start_after, broker::InitialPosition initial,
                                   int64_t skip_below)>;
// On the stream's topic home: where x-stream-offset `start` puts a new
// reader (consume.cc).
void stream_start(broker::Topic& topic, const StreamStart& start, StartAt then);
// Runs `fn` with what settles and flows `consumer`'s deliveries: its
// subscription here, or its session at the member that owns the queue.
void on_subscription_ops(AmqpService& service, const std::shared_ptr<QueueConsumer>& consumer,
                         std::function<void(SubscriptionOps&)> fn);
// Finds queue `name` ("" is the channel's last declared queue) for this
// connection to use: false after raising 404 when it does not exist or 405
// when it is another connection's exclusive queue.
bool find_queue(AmqpConnection& c, Channel& ch, const std::string& name, uint32_t key, QueueDef* out);
// The channel closes: its consumers and pullers are detached.
void release_consumers(AmqpConnection& c, Channel& ch);
// Deletes queues (topology, metadata, topics): an exclusive queue's
// connection closed, an auto-delete queue lost its last consumer, or (with
// `unused_since`: only if nobody used it after that) x-expires passed.
void delete_queues(AmqpService& service, const broker::NamespaceName& vhost, const std::vector<std::string>& queues,
                   std::optional<int64_t> unused_since = std::nullopt);

}  // namespace magnetar::protocol::amqp
