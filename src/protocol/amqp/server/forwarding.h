// Storing a published message's copies, on one node or across a cluster.
//
// basic.publish routes a message to queues (handlers/publish.cc); each
// routed queue takes a copy on its topic (a priority queue's: the level the
// message's priority picks). On a standalone node every topic is here. In a
// cluster each topic has one owning member, and a connection on any member
// publishes to every queue: the member the client is connected to stores
// the copies for topics it owns, and sends the copies for topics another
// member owns to that member over the cluster port (broker::RemoteCalls,
// method kAmqpPublish, cluster.fbs), which stores them as if they had been
// published there: its queue limits, dead-lettering and consumers apply. A
// publisher's confirm waits for every copy, wherever it is stored; a copy
// that could not be stored (its owner unreachable, or not the owner any
// more) nacks it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/client_info.h"
#include "broker/naming.h"
#include "broker/publish_stages.h"
#include "common/result.h"
#include "common/status.h"
#include "protocol/amqp/convert.h"

namespace magnetar::broker {
class RemoteCalls;
}

namespace magnetar::protocol::amqp {

class AmqpService;

// One queue a message goes to, and the priority level it goes to there
// (0 for a queue without priorities).
struct RoutedCopy {
  std::string queue;
  uint8_t level = 0;
};

// A routed message, as every copy of it is stored.
struct Publication {
  broker::NamespaceName vhost;
  std::vector<RoutedCopy> copies;
  AmqpMessage message;  // exchange, routing key, properties as received, body
  int64_t publish_time_ms = 0;
  std::string producer_name;
  uint64_t sequence = 0;
  uint64_t producer_id = 0;
  broker::ClientInfo client;
  PublishedEntry entry;  // the stored form, made from the fields above
  // A publish timed by stage (`timed`: one copy, stored here): the marks are
  // filled in on the topic's reactor and recorded when the confirm is queued.
  bool timed = false;
  mutable broker::PublishStages::Marks marks;
};

// `rejected`: a queue at its length refused its copy (x-overflow
// reject-publish).
using StoredCallback = std::function<void(common::Status, bool rejected)>;

// Stores every copy of `p`: here, or at the member that owns its topic.
// `done` runs once, on any thread, with the first failure.
void store_publication(AmqpService& service, std::shared_ptr<const Publication> p, StoredCallback done);

// Stores the copies of `p` in `copies` (topics this node owns). `done` runs
// once, on any thread.
void store_here(AmqpService& service, std::shared_ptr<const Publication> p, std::vector<RoutedCopy> copies,
                StoredCallback done);

// What a queue's topic holds: ready messages (not delivered and not
// unacknowledged) and consumers.
struct QueueCounts {
  uint64_t messages = 0;
  uint64_t consumers = 0;
};
using CountsDone = std::function<void(common::Result<QueueCounts>)>;

// What queue methods do to a queue's topic, where the topic is owned.
struct TopicCall {
  enum class Op : uint8_t {
    kPrepare = 1,  // queue.declare: create the topic and the queue's subscription
    kCounts = 2,   // the counts alone
    kPurge = 3,    // queue.purge: the counts purged
    kDelete = 4,   // queue.delete: the messages it held
  };
  Op op = Op::kCounts;
  bool fresh = false;   // kPrepare: the queue is new (a subscription left by an earlier one is replaced)
  bool stream = false;  // kPrepare: a stream queue (no subscription of its own)
};

// Runs `call` on `topic` here (handlers/queue.cc). REQUIRES: owned here.
void run_topic_call(AmqpService& service, const broker::TopicName& topic, TopicCall call, CountsDone done);

// Runs `call` on `topic` where it is owned: here, or at its owner over the
// cluster port (method kAmqpQueueTopic).
void on_topic_owner(AmqpService& service, const broker::TopicName& topic, TopicCall call, CountsDone done);

// Consumers read a queue on the member that owns its topic: `st`, the
// reason a topic could not be opened here, with the owner's AMQP address
// when it is another member's.
common::Status consume_here_refused(AmqpService& service, const broker::TopicName& topic, common::Status st);

// Answers other members' publishes and topic calls. A cluster member's
// AmqpService registers it at start.
void serve_cluster_calls(AmqpService& service, broker::RemoteCalls& calls);


}  // namespace magnetar::protocol::amqp
