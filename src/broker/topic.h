// Topic: a topic loaded on its home reactor, with its log, producers and
// subscriptions. Protocol-neutral: Pulsar, Kafka and AMQP handlers all
// publish and subscribe through it, which is why a message produced over one
// protocol can be consumed over another.
//
// Threads: every method on the home reactor (BrokerService::with_topic
// gets you there); callbacks run there too.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "broker/consumer.h"
#include "broker/naming.h"
#include "broker/subscription.h"
#include "common/result.h"
#include "ledger/log.h"

namespace magnetar::broker {

struct PublisherStats {
  uint64_t producer_id = 0;
  std::string producer_name;
  uint64_t messages_in = 0;
  uint64_t bytes_in = 0;
};

struct TopicStats {
  uint64_t messages_in = 0;
  uint64_t bytes_in = 0;
  uint64_t messages_out = 0;
  uint64_t bytes_out = 0;
  uint64_t storage_size = 0;     // bytes of entries the log holds
  uint64_t entries = 0;          // entries the log holds
  std::vector<PublisherStats> publishers;
  std::vector<SubscriptionStats> subscriptions;
};

class Topic {
 public:
  Topic(TopicName name, std::shared_ptr<ledger::Log> log);
  ~Topic();
  Topic(const Topic&) = delete;
  Topic& operator=(const Topic&) = delete;

  const TopicName& name() const { return name_; }
  ledger::Log& log() { return *log_; }
  bool closed() const { return closed_; }

  // Registers a producer. Names are unique per topic: kAlreadyExists when
  // another producer uses `producer_name`, kUnavailable once closed.
  common::Status add_producer(uint64_t producer_id, const std::string& producer_name);
  void remove_producer(uint64_t producer_id);

  // Appends one entry for a registered producer (its name goes into the
  // header) and completes with the entry's position once stored; consumers
  // are woken after that. kNotFound for an unknown producer.
  void publish(uint64_t producer_id, ledger::MessageHeader header, common::Slice payload,
               ledger::Callback<common::Result<ledger::Position>> done);

  // Attaches a consumer to subscription options.subscription, creating the
  // subscription (and its cursor) on first use: at the end of the log, or at
  // its beginning with InitialPosition::kEarliest.
  void subscribe(uint64_t consumer_id, ConsumerOptions options, ConsumerSink* sink,
                 ledger::Callback<common::Result<Subscription*>> done);
  Subscription* subscription(const std::string& name);
  std::vector<std::string> subscription_names() const;
  // Removes a subscription without consumers. kFailedPrecondition while it
  // has consumers, kNotFound when missing.
  common::Status unsubscribe(const std::string& name);

  TopicStats stats() const;

  // Detaches every consumer (telling each sink `why`), refuses new
  // producers and consumers, and closes the log.
  void close(const common::Status& why, ledger::Callback<common::Status> done);

 private:
  struct Producer {
    std::string name;
    uint64_t messages_in = 0;
    uint64_t bytes_in = 0;
  };

  const TopicName name_;
  std::shared_ptr<ledger::Log> log_;
  std::map<uint64_t, Producer> producers_;
  std::map<std::string, std::unique_ptr<Subscription>> subscriptions_;
  uint64_t messages_in_ = 0;
  uint64_t bytes_in_ = 0;
  uint64_t removed_messages_out_ = 0;  // from subscriptions since removed
  uint64_t removed_bytes_out_ = 0;
  bool closed_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace magnetar::broker
