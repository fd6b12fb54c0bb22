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
#include "broker/rate_meter.h"
#include "broker/subscription.h"
#include "common/result.h"
#include "ledger/log.h"

namespace magnetar::broker {

struct PublisherStats {
  uint64_t producer_id = 0;
  std::string producer_name;
  uint64_t messages_in = 0;
  uint64_t bytes_in = 0;
  double msg_rate_in = 0;   // filled by Topic::stats_at
  double byte_rate_in = 0;
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
  // Filled by Topic::stats_at, per second.
  double msg_rate_in = 0;
  double byte_rate_in = 0;
  double msg_rate_out = 0;
  double byte_rate_out = 0;
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
  // has consumers, kNotFound when missing. Its cursor is deleted from the
  // log in the background.
  common::Status unsubscribe(const std::string& name);
  // The same, completing once the cursor is gone from the log; with
  // `force`, consumers are detached first (their sinks are told the
  // subscription was deleted).
  void remove_subscription(const std::string& name, bool force, ledger::Callback<common::Status> done);
  // Creates a subscription with no consumer (its type is set by the first
  // consumer), its durable cursor at `start`. kAlreadyExists when it exists.
  void create_subscription(const std::string& name, InitialPosition start,
                           ledger::Callback<common::Result<Subscription*>> done);
  // Makes a subscription for every cursor the log already has (the durable
  // cursors it recovered). Called once, right after the topic is loaded.
  void restore_subscriptions();
  // Moves subscription `name`'s mark-delete position to `mark_delete`
  // (persisted), detaching its consumers first as Pulsar does, so they
  // reconnect and read from there. kNotFound when missing.
  void reset_subscription(const std::string& name, ledger::Position mark_delete,
                          ledger::Callback<common::Status> done);
  // Pulsar's seek (topic_seek.cc): subscription `name` delivers `first`
  // next, clamped to the log (Pulsar's earliest and latest ids included);
  // consumers are detached as by reset_subscription().
  void seek_subscription(const std::string& name, ledger::Position first, ledger::Callback<common::Status> done);
  // The same, to the first message published at or after `time_ms`
  // (persistent topics only; FailedPrecondition otherwise).
  void seek_subscription_by_time(const std::string& name, int64_t time_ms, ledger::Callback<common::Status> done);

  TopicStats stats() const;
  // stats() plus message and byte rates per second (see RateMeter).
  TopicStats stats_at(RateMeter::Clock::time_point now);
  size_t producer_count() const { return producers_.size(); }
  size_t consumer_count() const;

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
  std::map<std::string, RateMeter> meters_;  // "in", "out", "p/<id>", "s/<name>", "c/<name>/<id>"
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace magnetar::broker
