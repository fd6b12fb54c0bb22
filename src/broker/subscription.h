// Subscription: a named cursor on a topic and the consumers attached to it,
// with the dispatcher that hands them entries.
//
// Types (Pulsar's): Exclusive (one consumer; another is refused), Failover
// (many attach, one receives: the lowest priority value, then the first to
// attach), Shared (entries go round robin to consumers with permits; an
// entry unacknowledged when its consumer leaves goes to another). Key_Shared
// is not served yet (kUnimplemented).
//
// Dispatch reads from the log after the read position, at most as many
// entries as the consumers have permits (and at most kMaxReadEntries), skips
// entries the cursor already acknowledged, and goes on reading while permits
// last. When it reaches the end of the log it waits for the topic to call
// on_entries_added().
//
// Threads: the topic's home reactor, like its Topic.
#pragma once

#include <deque>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "broker/consumer.h"
#include "common/result.h"
#include "ledger/cursor.h"
#include "ledger/log.h"

namespace magnetar::broker {

struct ConsumerStats {
  uint64_t consumer_id = 0;
  std::string consumer_name;
  int64_t permits = 0;
  uint64_t unacked_entries = 0;
  uint64_t messages_out = 0;
  uint64_t bytes_out = 0;
  double msg_rate_out = 0;   // filled by Topic::stats_at
  double byte_rate_out = 0;
};

struct SubscriptionStats {
  std::string name;
  SubscriptionType type;
  bool typed = false;  // false until a consumer attached: no type yet
  uint64_t backlog_entries = 0;
  uint64_t backlog_messages = 0;
  uint64_t messages_out = 0;
  uint64_t bytes_out = 0;
  uint64_t unacked_entries = 0;
  size_t consumers = 0;
  bool durable = true;
  ledger::Position mark_delete;
  ledger::Position read_position;
  std::vector<ConsumerStats> consumer_list;
  double msg_rate_out = 0;   // filled by Topic::stats_at
  double byte_rate_out = 0;
};

class Subscription {
 public:
  static constexpr size_t kMaxReadEntries = 100;

  // `cursor` belongs to `log`, which outlives this subscription. Without a
  // type (created by an admin or recovered at load) the first consumer to
  // attach sets it; a subscription whose consumers all left takes the type
  // of the next one.
  Subscription(std::string name, SubscriptionType type, ledger::Log& log, ledger::Cursor& cursor);
  Subscription(std::string name, ledger::Log& log, ledger::Cursor& cursor);
  ~Subscription();

  const std::string& name() const { return name_; }
  SubscriptionType type() const { return type_; }
  ledger::Cursor& cursor() { return cursor_; }

  // Attaches a consumer. kFailedPrecondition ("ConsumerBusy") when an
  // Exclusive subscription already has one; kInvalidArgument when `options`
  // asks for another type than the subscription has while it has consumers.
  common::Result<Consumer*> add_consumer(uint64_t id, ConsumerOptions options, ConsumerSink* sink);
  // Detaches and forgets a consumer; its unacknowledged entries are
  // redelivered to others. Does not call its sink.
  void remove_consumer(uint64_t id);
  // Detaches every consumer, telling each sink why.
  void close_consumers(const common::Status& why);
  Consumer* consumer(uint64_t id);
  size_t consumer_count() const { return consumers_.size(); }

  // The client can take `messages` more.
  void flow(uint64_t consumer_id, uint32_t messages);
  // Acknowledgements (individual, cumulative, one message of a batch).
  common::Status ack(uint64_t consumer_id, ledger::Position p);
  common::Status ack_cumulative(uint64_t consumer_id, ledger::Position p);
  common::Status ack_batch_index(uint64_t consumer_id, ledger::Position p, uint32_t index, uint32_t batch_size);
  // Sends again what `consumer_id` holds unacknowledged (all of it when
  // `positions` is empty).
  void redeliver_unacknowledged(uint64_t consumer_id, const std::vector<ledger::Position>& positions = {});
  // The topic added entries: wake the dispatcher if it was waiting.
  void on_entries_added();
  // The cursor was moved (reset, skip, expiry) behind the dispatcher's
  // back: forget what is pending or read, and dispatch again from the new
  // mark-delete position. Reads in flight are dropped.
  void rewind();

  SubscriptionStats stats() const;

 private:
  Consumer* active_consumer();  // exclusive/failover: who receives
  void update_failover_active();
  void schedule_dispatch();
  void dispatch();
  void read_more();
  void on_read(common::Result<std::vector<ledger::LedgerEntry>> result);
  void on_redelivery_read(ledger::Position wanted, common::Result<std::vector<ledger::LedgerEntry>> result);
  // Hands `entries` to consumers; returns the ones nobody could take.
  std::vector<ledger::LedgerEntry> hand_out(std::vector<ledger::LedgerEntry> entries, bool redelivery);
  void deliver(Consumer& c, std::vector<ledger::LedgerEntry>& batch, bool redelivery);
  void forget_pending(ledger::Position p);
  void forget_pending_through(ledger::Position p);
  int64_t total_permits() const;

  const std::string name_;
  SubscriptionType type_;
  bool typed_;
  uint64_t generation_ = 0;  // bumped by rewind(); reads of an older one are dropped
  ledger::Log& log_;
  ledger::Cursor& cursor_;
  std::vector<std::unique_ptr<Consumer>> consumers_;  // in attach order
  Consumer* failover_active_ = nullptr;
  size_t round_robin_ = 0;
  ledger::Position read_position_;           // the last entry read for dispatch
  std::set<ledger::Position> redeliver_;     // entries to send again, oldest first
  std::map<ledger::Position, uint32_t> redelivery_counts_;
  bool reading_ = false;
  bool dispatch_scheduled_ = false;
  bool waiting_for_entries_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  uint64_t messages_out_ = 0;
  uint64_t bytes_out_ = 0;
};

}  // namespace magnetar::broker
