// AMQP consumers of queues another cluster member owns.
//
// A queue's messages are its topic's subscription, and only the topic's
// owner holds it. A client connected to any member may consume: when the
// queue's topic is owned elsewhere, the member it is connected to (the
// consumer's member) opens a session at the owner (RPC kAmqpConsumeOpen),
// which attaches a broker consumer to the subscription and sends what that
// consumer is given back to the consumer's member (kAmqpDeliveries), where
// it is delivered to the client as a local consumer's would be. Permits,
// acknowledgements, requeues and the consumer's end go to the owner
// (kAmqpConsumerOp), in order, over the one channel between the two.
//
// A consumer's permits bound what is in flight between the members. When
// either member stops seeing the other alive (checked every 2 s), the
// owner removes the consumer (its unacknowledged messages go back to the
// queue) and the consumer's member cancels it (basic.cancel to the client).
// A session whose consumer is gone is closed when the owner next sends to
// it, or when its last reference goes.
//
// basic.get reads through a session too (a puller: one permit per get, the
// ready count asked of the owner first). Not forwarded: stream queues'
// consumers, refused elsewhere than on the owner (forwarding.h,
// consume_here_refused).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "broker/consumer.h"
#include "broker/naming.h"
#include "common/result.h"
#include "protocol/amqp/server/topology.h"
#include "ledger/position.h"
#include "runtime/timer.h"

namespace magnetar::runtime {
class Runtime;
}
namespace magnetar::broker {
class RemoteCalls;
class Ownership;
}

namespace magnetar::protocol::amqp {

class AmqpService;

// What a consumer does to its queue's subscription: the broker's own, or
// the same operations sent to the member that owns it.
class SubscriptionOps {
 public:
  virtual ~SubscriptionOps() = default;
  virtual void flow(uint32_t permits) = 0;
  virtual void ack(ledger::Position p) = 0;
  virtual void ack_batch_index(ledger::Position p, uint32_t index, uint32_t size) = 0;
  virtual void redeliver(const std::vector<ledger::Position>& positions) = 0;
};

class RemoteConsumers;

// The consumer's member's end of one session. Thread-safe. Closed (the
// owner told to remove the consumer) by close() or when the last reference
// goes.
class RemoteSession final : public SubscriptionOps {
 public:
  RemoteSession(std::shared_ptr<RemoteConsumers> registry, uint64_t owner, uint64_t session, int64_t skip_below)
      : registry_(std::move(registry)), owner_(owner), session_(session), skip_below_(skip_below) {}
  ~RemoteSession() override;
  RemoteSession(const RemoteSession&) = delete;
  RemoteSession& operator=(const RemoteSession&) = delete;

  void flow(uint32_t permits) override;
  void ack(ledger::Position p) override;
  void ack_batch_index(ledger::Position p, uint32_t index, uint32_t size) override;
  void redeliver(const std::vector<ledger::Position>& positions) override;
  // Ends the consumer at the owner; `auto_delete_queue` (may be empty) goes
  // if this was its last consumer. Later calls do nothing.
  void close(const std::string& auto_delete_queue);
  uint64_t owner() const { return owner_; }
  // A stream consumer's: the offset its first entry's messages start being delivered at.
  int64_t skip_below() const { return skip_below_; }

 private:
  std::shared_ptr<RemoteConsumers> registry_;
  const uint64_t owner_;
  const uint64_t session_;
  const int64_t skip_below_;
  std::mutex mu_;
  bool closed_ = false;
};

class RemoteConsumers : public std::enable_shared_from_this<RemoteConsumers> {
 public:
  using Opened = std::function<void(common::Result<std::shared_ptr<RemoteSession>>)>;

  RemoteConsumers(AmqpService& service, runtime::Runtime& runtime, broker::RemoteCalls& calls,
                  broker::Ownership& ownership, uint64_t self);
  ~RemoteConsumers();
  // Registers the handlers and starts the liveness check.
  void start();
  // Removes every consumer served here for other members and cancels the
  // ones this member's clients have elsewhere. The handlers answer nothing
  // after it.
  void stop();

  // Consumer's member: a consumer of `topic` at member `owner` with
  // `options`, delivering to `sink` (kept weakly: a sink that is gone ends
  // the session); a stream consumer's reader starts where `stream` says.
  // It starts without permits: flow() gives them. `done` runs on any
  // thread.
  void open(uint64_t owner, const broker::TopicName& topic, const broker::ConsumerOptions& options,
            const std::shared_ptr<broker::ConsumerSink>& sink, const std::optional<StreamStart>& stream,
            Opened done);

 private:
  friend class RemoteSession;
  class ForwardingSink;
  struct Served {
    broker::TopicName topic;
    std::string subscription;
    uint64_t consumer_id = 0;
    std::shared_ptr<ForwardingSink> sink;
  };
  struct Consumed {
    uint64_t owner = 0;
    std::weak_ptr<broker::ConsumerSink> sink;
  };
  using ServedKey = std::pair<uint64_t, uint64_t>;  // (origin member, session)

  // Sends a session's operation; one that does not arrive cancels the
  // consumer here.
  void send_op(uint64_t owner, uint64_t session, std::string payload);
  void forget_consumed(uint64_t session);
  // Owner: the handlers.
  void serve_open(std::string_view payload, std::function<void(std::string)> reply);
  void serve_op(std::string_view payload, std::function<void(std::string)> reply);
  void serve_deliveries(std::string_view payload, std::function<void(std::string)> reply);
  // Owner: removes a served consumer (its unacknowledged messages go back);
  // `auto_delete_queue` goes when it was the last consumer.
  void end_served(const ServedKey& key, const std::string& auto_delete_queue);
  void check_liveness();

  AmqpService& service_;
  runtime::Runtime& runtime_;
  broker::RemoteCalls& calls_;
  broker::Ownership& ownership_;
  const uint64_t self_;
  std::unique_ptr<runtime::Timer> timer_;  // on reactor 0
  std::mutex mu_;
  bool stopped_ = false;                       // guarded by mu_
  std::map<ServedKey, Served> served_;         // guarded by mu_
  std::map<uint64_t, Consumed> consumed_;      // by session; guarded by mu_
};

}  // namespace magnetar::protocol::amqp
