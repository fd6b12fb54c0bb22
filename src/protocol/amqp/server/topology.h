// Topology: the exchanges, queues and bindings of one vhost, and routing.
//
// Exchange types: direct (binding key == routing key), fanout (every
// binding), topic (binding keys are dot-separated words where '*' matches
// one word and '#' zero or more), headers (binding arguments against message
// headers; x-match all (default) or any; all-with-x / any-with-x also compare
// x- arguments). The default exchange "" routes to the queue named by the
// routing key; amq.direct, amq.fanout, amq.topic, amq.headers and amq.match
// always exist. An exchange may be bound to another exchange; routing
// follows such bindings once per exchange, so cycles end.
//
// Pure data: no I/O, no threads. AmqpService guards each vhost's topology
// with its lock and persists durable entities.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "protocol/amqp/wire.h"

namespace magnetar::protocol::amqp {

enum class ExchangeType { kDirect, kFanout, kTopic, kHeaders };

common::Result<ExchangeType> parse_exchange_type(std::string_view name);
std::string_view exchange_type_name(ExchangeType t);

struct ExchangeDef {
  std::string name;
  ExchangeType type = ExchangeType::kDirect;
  bool durable = false;
  bool auto_delete = false;
  bool internal = false;
  FieldTable arguments;
  bool builtin = false;  // "" and amq.*: cannot be declared differently or deleted
};

// What a queue at its x-max-length or x-max-length-bytes does with one
// more message (x-overflow): drop its oldest, or refuse the new one
// (basic.nack to a publisher with confirms), dead-lettering it with -dlx.
enum class Overflow { kDropHead, kRejectPublish, kRejectPublishDlx };

// Queue arguments Magnetar acts on, read from the declare's table.
struct QueueArguments {
  std::optional<int64_t> message_ttl_ms;   // x-message-ttl
  std::optional<int64_t> max_length;       // x-max-length
  std::optional<int64_t> max_length_bytes;  // x-max-length-bytes: bodies of the ready messages
  Overflow overflow = Overflow::kDropHead;  // x-overflow
  std::optional<int64_t> expires_ms;       // x-expires
  std::optional<std::string> dead_letter_exchange;     // x-dead-letter-exchange
  std::optional<std::string> dead_letter_routing_key;  // x-dead-letter-routing-key
  bool single_active_consumer = false;     // x-single-active-consumer
  // x-queue-type stream: a log read without removing (every consumer
  // reads from its own x-stream-offset); kept by retention alone,
  // x-max-length-bytes and x-max-age (-1: no limit).
  bool stream = false;
  int64_t stream_max_bytes = -1;
  int64_t stream_max_age_ms = -1;
  // x-max-priority: a priority queue with levels 0..max_priority, each a
  // topic of its own (AmqpService::queue_topic); 0: not one.
  uint8_t max_priority = 0;
  // The level a message of `priority` (basic property) goes to: capped at
  // max_priority, 0 without one.
  uint8_t level_of(std::optional<uint8_t> priority) const {
    return max_priority == 0 ? 0 : std::min(priority.value_or(0), max_priority);
  }
  bool bounded() const { return max_length.has_value() || max_length_bytes.has_value(); }
  bool rejects_overflow() const { return bounded() && overflow != Overflow::kDropHead; }
};

// Reads and checks the x- arguments (406 PRECONDITION_FAILED text when one
// has the wrong type or range). x-queue-type: classic and quorum are a
// queue on the log (durable or not as declared; a quorum queue's
// replication is its namespace's persistence policy); stream is the log
// itself, read without removing, and refuses the arguments of destructive
// queues (TTL, length limits, dead-lettering, x-expires, priorities, single
// active consumer); any other type is refused. Other x- arguments are
// ignored, as RabbitMQ ignores them.
common::Result<QueueArguments> parse_queue_arguments(const FieldTable& args);

// A duration as RabbitMQ's x-max-age writes it: a positive number and one
// unit, Y (365 days), M (30 days), D, h, m or s ("7D", "12h"); in ms.
common::Result<int64_t> parse_age(std::string_view text);

// Where a stream consumer starts (basic.consume's x-stream-offset).
struct StreamStart {
  enum class Kind { kFirst, kLast, kNext, kOffset, kTime };
  Kind kind = Kind::kNext;
  int64_t value = 0;  // kOffset: the message offset; kTime: wall clock, ms
};
// Reads x-stream-offset: "first", "last", "next", an age ("1h": that long
// ago), an integer offset, or an AMQP timestamp (seconds). Absent: next.
// `now_ms` turns an age into a time.
common::Result<StreamStart> parse_stream_offset(const FieldValue* v, int64_t now_ms);

struct QueueDef {
  std::string name;
  bool durable = false;
  bool exclusive = false;
  bool auto_delete = false;
  FieldTable arguments;
  QueueArguments parsed;
  uint64_t owner = 0;  // exclusive: the id of the connection that owns it
  int64_t last_used_ms = 0;  // declared, consumed from or read (x-expires)
  uint32_t consumers = 0;    // basic.consume consumers attached
  uint64_t exclusive_consumer = 0;  // the broker id of a consumer that asked for exclusive use; 0: none
};

struct Binding {
  std::string source;       // exchange
  bool to_exchange = false; // destination is an exchange (exchange.bind), else a queue
  std::string destination;
  std::string routing_key;
  FieldTable arguments;
  bool operator==(const Binding& o) const {
    return source == o.source && to_exchange == o.to_exchange && destination == o.destination &&
           routing_key == o.routing_key && arguments == o.arguments;
  }
};

// Whether topic binding key `pattern` matches `routing_key`.
bool topic_matches(std::string_view pattern, std::string_view routing_key);
// Whether a headers binding's arguments match a message's headers.
bool headers_match(const FieldTable& binding_args, const FieldTable* headers);

class Topology {
 public:
  // With the default and amq.* exchanges.
  Topology();

  const ExchangeDef* exchange(const std::string& name) const;
  const QueueDef* queue(const std::string& name) const;
  QueueDef* mutable_queue(const std::string& name);
  void put_exchange(ExchangeDef e) { exchanges_[e.name] = std::move(e); }
  void put_queue(QueueDef q) { queues_[q.name] = std::move(q); }
  // Removes the exchange and every binding from or to it; returns those
  // bindings (for the caller to forget durably).
  std::vector<Binding> remove_exchange(const std::string& name);
  std::vector<Binding> remove_queue(const std::string& name);
  // False when it existed already.
  bool add_binding(Binding b);
  // False when it did not exist.
  bool remove_binding(const Binding& b);
  // Auto-delete exchanges that were the source of one of `removed` and are
  // the source of no binding now go, with the bindings to them (cascading).
  // Returns the exchanges and bindings removed, for the caller to forget
  // durably.
  std::pair<std::vector<ExchangeDef>, std::vector<Binding>> drop_unused_auto_delete(std::vector<Binding> removed);
  // Whether the exchange is the source or destination of any binding.
  bool exchange_in_use(const std::string& name) const;
  size_t queue_binding_count(const std::string& queue) const;
  const std::vector<Binding>& bindings() const { return bindings_; }
  const std::map<std::string, QueueDef>& queues() const { return queues_; }
  const std::map<std::string, ExchangeDef>& exchanges() const { return exchanges_; }

  // The queues a message published to `exchange` with `routing_key` and
  // `headers` (may be null) goes to, each once. REQUIRES: the exchange exists.
  std::vector<std::string> route(const std::string& exchange, std::string_view routing_key,
                                 const FieldTable* headers) const;

 private:
  void route_from(const ExchangeDef& e, std::string_view routing_key, const FieldTable* headers,
                  std::set<std::string>& visited, std::set<std::string>& queues) const;

  std::map<std::string, ExchangeDef> exchanges_;
  std::map<std::string, QueueDef> queues_;
  std::vector<Binding> bindings_;
};

}  // namespace magnetar::protocol::amqp
