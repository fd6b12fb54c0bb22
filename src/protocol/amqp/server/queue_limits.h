// What a queue's arguments ask of it once messages are in it:
//   - dead-lettering (x-dead-letter-exchange, x-dead-letter-routing-key): a
//     message rejected without requeue, expired, or dropped for length is
//     republished through the dead-letter exchange (with the original
//     routing key unless one is set), with an x-death entry (reason, queue,
//     exchange, routing keys, time, count) and x-first-death-* headers, its
//     own expiration moved into x-death; without one it is dropped;
//   - x-message-ttl and per-message `expiration`: a message older than
//     either is not delivered;
//   - x-max-length, x-max-length-bytes (the ready messages as stored:
//     body, properties and routing): with x-overflow drop-head (the
//     default) the oldest ready messages beyond them are dropped; with
//     reject-publish a message that would go past them is refused
//     (admit_or_reject), with reject-publish-dlx also dead-lettered;
//   - x-expires: a queue without consumers that nobody used for that long
//     is deleted.
//
// Enforcement: a consumer about to receive an expired message dead-letters
// it instead; while a queue has no consumers, a sweep (after each publish to
// a queue with x-max-length, and every kSweepInterval for queues with
// limits) drops expired messages at the head and those over the length.
//
// Threads: dead_letter from any thread; sweep on the topic's home reactor;
// QueueKeeper's timer on reactor 0.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "broker/broker_service.h"
#include "broker/publish_stages.h"
#include "broker/topic.h"
#include "protocol/amqp/convert.h"
#include "protocol/amqp/server/topology.h"
#include "runtime/runtime.h"
#include "runtime/timer.h"

namespace magnetar::protocol::amqp {

class AmqpService;

// Whether anything here applies to a queue with these arguments
// (dead-lettering, expiry, length, x-expires).
inline bool has_limits(const QueueArguments& a) {
  return a.message_ttl_ms || a.bounded() || a.dead_letter_exchange || a.expires_ms;
}

// A queue as the limits need it.
struct QueueRef {
  broker::NamespaceName vhost;
  std::string name;
  QueueArguments args;
  bool auto_delete = false;
  bool limited() const { return has_limits(args); }
};

inline constexpr std::chrono::milliseconds kSweepInterval{200};

// Whether message `m`, published at `publish_ms`, has expired at `now_ms`
// (its queue's x-message-ttl or its own expiration).
bool expired(const QueueArguments& args, const AmqpMessage& m, int64_t publish_ms, int64_t now_ms);

// Republishes `m` through the queue's dead-letter exchange; `done` runs once
// every copy is stored (or at once when there is none to make), on any
// reactor. A copy that could not be stored is logged and counted here
// (AmqpMetrics::dead_letter_failures); callers settle the original anyway.
void dead_letter(AmqpService& service, const QueueRef& queue, const AmqpMessage& m, std::string_view reason,
                 std::function<void(common::Status)> done);

// On the topic's home reactor: while the queue has no consumers, drops
// (dead-letters) expired messages at its head and the oldest beyond its
// length. `done` runs there afterwards.
void sweep(AmqpService& service, broker::Topic& topic, QueueRef queue, std::function<void()> done);

// On `topic`'s home reactor: appends `entry` (message `m`) to queue
// `queue`'s topic unless the queue is at its length (x-overflow
// reject-publish): then it is refused, counted, dead-lettered with
// reject-publish-dlx, and `done` gets `rejected` true. `done` on the home
// reactor once stored or refused, with the store's error.
void admit_or_reject(AmqpService& service, broker::Topic& topic, const QueueRef& queue, const PublishedEntry& entry,
                     const AmqpMessage& m, uint64_t producer_id, const std::string& producer_name,
                     const broker::ClientInfo& client, std::function<void(common::Status, bool rejected)> done);

// On `topic`'s home reactor, once a copy is stored: runs `fn` when the
// queue's consumers keep up (broker::Subscription::when_caught_up), so a
// publisher faster than the consumers waits for its confirm (and, past its
// connection's in-flight bound, stops being read) instead of growing the
// queue and every message's time in it without bound, as RabbitMQ's credit
// flow holds publishers. At once for a topic that is gone.
void when_consumers_keep_up(broker::Topic* topic, const std::weak_ptr<bool>& alive, std::function<void()> fn);

// Appends `entry` to every topic as producer (`producer_id`,
// `producer_name`), registering it on first use; `done` runs once every
// copy is stored, with the first error, on the reactor of the last.
// `marks` (one topic only): where the publish's time went, filled in on
// the topic's reactor before `done` runs.
void append_copies(broker::BrokerService& broker, const std::vector<broker::TopicName>& topics,
                   const PublishedEntry& entry, uint64_t producer_id, const std::string& producer_name,
                   const broker::ClientInfo& client, std::function<void(common::Status)> done,
                   std::shared_ptr<broker::PublishStages::Marks> marks = nullptr);

// Sweeps every queue with limits every kSweepInterval, and deletes queues
// whose x-expires passed. The timer runs only while such queues exist.
class QueueKeeper {
 public:
  explicit QueueKeeper(AmqpService& service, runtime::Runtime& runtime) : service_(service), runtime_(runtime) {}
  // Any thread: (re)considers whether the timer should run.
  void changed();
  // Main thread, before the runtime stops.
  void stop();

 private:
  void tick();
  AmqpService& service_;
  runtime::Runtime& runtime_;
  std::unique_ptr<runtime::Timer> timer_;  // on reactor 0
  bool stopped_ = false;                   // reactor 0
};

}  // namespace magnetar::protocol::amqp
