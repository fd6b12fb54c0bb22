// Subscription: a named cursor on a topic and the consumers attached to it,
// with the dispatcher that hands them entries.
//
// Types (Pulsar's): Exclusive (one consumer; another is refused), Failover
// (many attach, one receives: the lowest priority value, then the first to
// attach), Shared (entries go round robin to consumers with permits; an
// entry unacknowledged when its consumer leaves goes to another), Key_Shared
// (entries go to the consumer owning the hash of their key, see
// key_shared_selector.h).
//
// Dispatch reads from the log after the read position, at most as many
// entries as the consumers have permits (and at most kMaxReadEntries, and
// for consumers with a delivery credit as many as it covers at the recent
// entries' cost), skips entries the cursor already acknowledged, and goes
// on reading while permits and credit last. When it reaches the end of the log it waits for the topic to call
// on_entries_added(). Entries to send again (a consumer left, or asked for
// redelivery) are read again before new ones.
//
// Key_Shared keeps each key in order while consumers come and go: an entry
// is not delivered to its key's owner while another consumer still holds an
// earlier entry of the same hash slot unacknowledged (the old owner of a
// range that moved), nor while an earlier entry of that slot waits to be
// sent. Entries read that cannot go out yet wait in memory, at most
// kMaxHeldEntries; while that many wait, no new entries are read.
//
// Shared and Key_Shared only:
//   - delayed delivery: an entry whose deliver-at time is in the future is
//     held in a DelayedDeliveryIndex and sent when due (a timer on the home
//     reactor). Exclusive and Failover deliver it at once, as Pulsar does.
//   - unacked limits: a consumer holding max_unacked_per_consumer messages
//     unacknowledged gets nothing more until acknowledgements bring it down
//     to half of that; the same for the whole subscription with
//     max_unacked_per_subscription. 0 means no limit.
//
// Threads: the topic's home reactor, like its Topic.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "broker/consumer.h"
#include "broker/token_bucket.h"
#include "broker/delayed_delivery.h"
#include "broker/key_shared_selector.h"
#include "broker/tracing.h"
#include "common/lazy_map.h"
#include "common/result.h"
#include "ledger/cursor.h"
#include "ledger/log.h"
#include "runtime/timer.h"

namespace magnetar::broker {

struct ConsumerStats {
  uint64_t consumer_id = 0;
  std::string consumer_name;
  ClientInfo client{};
  int64_t permits = 0;
  uint64_t unacked_entries = 0;
  uint64_t unacked_messages = 0;
  bool blocked_on_unacked = false;
  std::vector<HashRange> hash_ranges;  // Key_Shared
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
  uint64_t dispatch_rate_limited_times = 0;  // dispatches that waited for a dispatch rate limit
  uint64_t unacked_entries = 0;
  uint64_t unacked_messages = 0;
  uint64_t delayed_entries = 0;          // held for a later deliver-at time
  bool blocked_on_unacked = false;
  size_t consumers = 0;
  bool durable = true;
  bool replicated = false;
  ledger::Position mark_delete;
  ledger::Position read_position;
  std::vector<ConsumerStats> consumer_list;
  double msg_rate_out = 0;   // filled by Topic::stats_at
  double byte_rate_out = 0;
};

class Subscription {
 public:
  static constexpr size_t kMaxReadEntries = 500;
  static constexpr size_t kMaxHeldEntries = 1000;
  // Pulsar's defaults for maxUnackedMessagesPerConsumer / PerSubscription.
  static constexpr uint64_t kDefaultMaxUnackedPerConsumer = 50000;
  static constexpr uint64_t kDefaultMaxUnackedPerSubscription = 200000;

  // `cursor` belongs to `log`, which outlives this subscription. Without a
  // type (created by an admin or recovered at load) the first consumer to
  // attach sets it; a subscription whose consumers all left takes the type
  // of the next one.
  // Named as its cursor is.
  Subscription(SubscriptionType type, ledger::Log& log, ledger::Cursor& cursor);
  Subscription(ledger::Log& log, ledger::Cursor& cursor);
  ~Subscription();

  const std::string& name() const { return cursor_.name(); }
  SubscriptionType type() const { return type_; }
  ledger::Cursor& cursor() const { return cursor_; }

  // Attaches a consumer. kFailedPrecondition ("ConsumerBusy") when an
  // Exclusive subscription already has one; kInvalidArgument when `options`
  // asks for another type (or Key_Shared mode) than the subscription has
  // while it has consumers; for Key_Shared, the selector's errors (sticky
  // ranges that overlap: kFailedPrecondition; no range left to split:
  // kResourceExhausted).
  common::Result<Consumer*> add_consumer(uint64_t id, ConsumerOptions options, ConsumerSink* sink);
  // Detaches and forgets a consumer; its unacknowledged entries are
  // redelivered to others. Does not call its sink.
  void remove_consumer(uint64_t id);
  // Detaches every consumer, telling each sink why.
  void close_consumers(const common::Status& why);
  Consumer* consumer(uint64_t id);
  size_t consumer_count() const { return consumers_.size(); }

  // Flow control for publishers that must not outrun this subscription's
  // consumers (AMQP's, as RabbitMQ's credit flow holds publishers): runs
  // `fn` at once unless dispatch is more than kLagEntries behind the stored
  // entries while its consumers could take more; then once it is back
  // within half of that, or its consumers cannot take more (no permits or
  // credit, unacked limits, dispatch rate limits: they set the pace, and a
  // stuck consumer must not stall publishers), or the subscription goes.
  // Callbacks run in the order given, deferred on this reactor.
  void when_caught_up(std::function<void()> fn);
  static constexpr uint64_t kLagEntries = 1000;

  // The client can take `messages` more.
  void flow(uint64_t consumer_id, uint32_t messages);
  // The consumer's handler can be handed `bytes` more of entries
  // (delivery_cost); ignored for a consumer without a delivery_credit.
  void add_credit(uint64_t consumer_id, int64_t bytes);
  // Acknowledgements (individual, cumulative, one message of a batch).
  common::Status ack(uint64_t consumer_id, ledger::Position p);
  common::Status ack_cumulative(uint64_t consumer_id, ledger::Position p);
  // Acknowledges every entry through p on nobody's behalf (another
  // cluster's acknowledgements of a replicated subscription), whatever the
  // subscription's type.
  common::Status ack_through(ledger::Position p);
  common::Status ack_batch_index(uint64_t consumer_id, ledger::Position p, uint32_t index, uint32_t batch_size);
  // Acknowledges the messages of batch entry p that `unacked` (Pulsar's
  // ack_set: bit i set = message i still unacknowledged; bits past the
  // words given are clear) leaves out. `batch_size` 0: the size the entry
  // was delivered with. The whole entry when none is left.
  common::Status ack_batch(uint64_t consumer_id, ledger::Position p, const std::vector<uint64_t>& unacked,
                           uint32_t batch_size);
  // Sends again what `consumer_id` holds unacknowledged (all of it when
  // `positions` is empty).
  void redeliver_unacknowledged(uint64_t consumer_id, const std::vector<ledger::Position>& positions = {});
  // The topic added entries: wake the dispatcher if it was waiting.
  void on_entries_added();
  // The cursor was moved (reset, skip, expiry) behind the dispatcher's
  // back: forget what is pending or read, and dispatch again from the new
  // mark-delete position. Reads in flight are dropped.
  void rewind();

  // Whether entries are read through the log's compacted view
  // (Log::read_compacted): the latest consumer to attach decides.
  void set_read_compacted(bool on) { read_compacted_ = on; }
  bool read_compacted() const { return read_compacted_; }

  // Unacked-message limits (Shared and Key_Shared); 0 = no limit.
  void set_unacked_limits(uint64_t per_consumer, uint64_t per_subscription);
  uint64_t max_unacked_per_consumer() const { return max_unacked_per_consumer_; }
  uint64_t max_unacked_per_subscription() const { return max_unacked_per_subscription_; }
  // Dispatch rate limits (Pulsar's dispatchRate and
  // subscriptionDispatchRate, and the tenant's): `topic` is shared by the
  // topic's subscriptions, `tenant` by every subscription and Kafka fetch
  // of the tenant (null: none; its topic holds it, so it outlives this);
  // `own` is this subscription's, per second (-1: none). Reads for delivery
  // wait while any is spent, and what is delivered is charged to all. Home
  // reactor.
  void set_dispatch_limits(std::shared_ptr<RateBuckets> topic, RateBuckets* tenant, int64_t own_msgs,
                           int64_t own_bytes);
  // Times a dispatch waited for a dispatch rate limit.
  uint64_t dispatch_rate_limited_times() const { return dispatch_ ? dispatch_->limited_times : 0; }

  SubscriptionStats stats() const;

  // The topic's tracing state, read on every dispatch and ack. REQUIRES:
  // `tracing` outlives this subscription.
  void set_tracing(TopicTracing* tracing) { tracing_ = tracing; }

 private:
  // Records a consumer's event about the entry at `p` when it is traced.
  void trace(TraceStage stage, uint64_t consumer_id, ledger::Position p, uint32_t redelivery_count = 0);
  // Records `e` as done by consumer `consumer_id` (its name and client).
  void record_by(uint64_t consumer_id, TraceEvent e);
  Consumer* active_consumer();  // exclusive/failover: who receives
  void update_failover_active();
  bool holds_back_delayed() const {
    return type_ == SubscriptionType::kShared || type_ == SubscriptionType::kKeyShared;
  }
  bool limits_apply() const { return holds_back_delayed(); }
  // Whether consumer c may be given more now (permits, delivery credit,
  // unacked limit).
  bool can_take(const Consumer& c) const;
  static bool has_credit(const Consumer& c) { return !c.credit_bound_ || c.credit_ > 0; }
  // Charges c for being handed e, `messages` of whose messages it will see.
  void charge(Consumer& c, const ledger::LedgerEntry& e, uint32_t messages);
  // Entries worth reading for the delivery credit of `active` (Exclusive,
  // Failover) or of the consumers that may take now (Shared, Key_Shared),
  // at the recent entries' cost; one until an entry showed what they cost;
  // SIZE_MAX when one of them has no credit bound.
  size_t credit_entries(const Consumer* active) const;
  // Unacked messages c (or the subscription) may still be given before its
  // limit; UINT64_MAX without one.
  uint64_t consumer_room(const Consumer& c) const;
  uint64_t subscription_room() const;
  void add_pending(Consumer& c, ledger::Position p, Consumer::Pending pending);
  // Drops p from c's pending entries (if there) and unblocks c or the
  // subscription when that brings them under their limits.
  void drop_pending(Consumer& c, ledger::Position p);
  void drop_pending_through(Consumer& c, ledger::Position p);
  void after_unacked_drop(Consumer& c);
  // Moves what c holds (all, or `positions`) to the entries to send again.
  void take_back(Consumer& c, const std::vector<ledger::Position>* positions);
  uint32_t slot_of(const ledger::MessageHeader& h) const;
  // Entries read, delivered, waiting or held back: a fresh read skips them.
  bool known(ledger::Position p) const;
  void hold_back(ledger::Position p, int64_t deliver_at_ms, uint32_t slot);
  void arm_delay_timer();
  void on_delay_timer();
  void schedule_dispatch();
  void dispatch();
  // `allowance`: messages the dispatch rate limits let go out now.
  void dispatch_key_shared(int64_t allowance);
  void on_key_shared_read(common::Result<std::vector<ledger::LedgerEntry>> result, bool redelivery,
                          ledger::Position wanted);
  void read_more();
  // A read for dispatch came back: false (waiting for the topic to grow)
  // when it failed or found nothing; else read_position_ moves past it.
  bool take_read(const common::Result<std::vector<ledger::LedgerEntry>>& result);
  void on_read(common::Result<std::vector<ledger::LedgerEntry>> result);
  void on_redelivery_read(ledger::Position wanted, common::Result<std::vector<ledger::LedgerEntry>> result);
  // Hands `entries` to consumers; returns the ones nobody could take.
  std::vector<ledger::LedgerEntry> hand_out(std::vector<ledger::LedgerEntry> entries);
  void deliver(Consumer& c, std::vector<ledger::LedgerEntry>& batch);
  // Messages of entry e the consumer will see (a batch less its acked ones).
  uint32_t unacked_messages_of(const ledger::LedgerEntry& e) const;
  Consumer* owner_of(uint32_t slot);
  // Whether a consumer other than c holds an entry of `slot` unacknowledged.
  bool slot_pending_elsewhere(uint32_t slot, const Consumer* c) const;
  void forget_pending(ledger::Position p);
  void forget_pending_through(ledger::Position p);
  int64_t total_permits() const;
  // Whether more than `entries` stored entries wait for dispatch while the
  // consumers could take them (when_caught_up).
  bool behind_by_more_than(uint64_t entries);
  // Runs the when_caught_up callbacks once dispatch is within half of
  // kLagEntries (every one when `all`).
  void release_caught_up(bool all);

  uint64_t generation_ = 0;  // bumped by rewind(); reads of an older one are dropped
  ledger::Log& log_;
  bool read_compacted_ = false;  // set_read_compacted
  ledger::Cursor& cursor_;
  std::vector<std::unique_ptr<Consumer>> consumers_;  // in attach order
  Consumer* failover_active_ = nullptr;
  ledger::Position read_position_;           // the last entry read for dispatch
  ledger::Position highest_delivered_;       // the highest entry ever handed to a consumer
  // Entries to send again, oldest first -> their Key_Shared slot (0 otherwise).
  common::LazyMap<ledger::Position, uint32_t> redeliver_;
  // Entries delivered before -> how many times (the next redelivery count).
  common::LazyMap<ledger::Position, uint32_t> redelivery_counts_;
  struct Held {
    ledger::LedgerEntry entry;
    uint32_t slot;
  };
  common::LazyMap<ledger::Position, Held> held_;  // Key_Shared: read, not deliverable yet
  std::unique_ptr<KeySharedSelector> selector_;
  // Delayed delivery (Shared and Key_Shared), made when the first entry is held back.
  struct Delayed {
    DelayedDeliveryIndex index;
    std::unique_ptr<runtime::Timer> timer;
    int64_t timer_at = 0;  // when the armed timer fires (ms)
  };
  std::unique_ptr<Delayed> delayed_;
  // Dispatch rate limits (subscription_dispatch_rate.cc).
  bool dispatch_rate_limited() const {
    return (dispatch_ && (dispatch_->topic != nullptr || dispatch_->own.limited())) ||
           (tenant_dispatch_ && tenant_dispatch_->limited());
  }
  // Messages the limits allow to read now; 0 after arming a retry.
  int64_t dispatch_allowance();
  void charge_dispatch(int64_t messages, int64_t bytes);
  RateBuckets* tenant_dispatch_ = nullptr;  // the topic holds it
  // The topic's and this subscription's own limits and the retry timer,
  // made when one of them is set or a limit first holds a dispatch back.
  struct DispatchLimits {
    std::shared_ptr<RateBuckets> topic;
    RateBuckets own;
    std::unique_ptr<runtime::Timer> timer;
    uint64_t limited_times = 0;
  };
  std::unique_ptr<DispatchLimits> dispatch_;
  // What the entries handed out recently cost (delivery_cost): a larger one
  // at once, smaller ones an eighth of the way each; 0 before the first.
  int64_t entry_cost_ = 0;
  uint32_t max_unacked_per_consumer_ = kDefaultMaxUnackedPerConsumer;
  uint32_t max_unacked_per_subscription_ = kDefaultMaxUnackedPerSubscription;
  uint64_t unacked_messages_ = 0;            // over every consumer
  SubscriptionType type_;
  bool typed_;
  bool blocked_on_unacked_ = false;          // the subscription's limit
  bool reading_ = false;
  bool dispatch_scheduled_ = false;
  bool waiting_for_entries_ = false;
  uint32_t round_robin_ = 0;
  std::unique_ptr<std::vector<std::function<void()>>> caught_up_waiters_;  // when_caught_up; null: none
  // Expires with this subscription: asynchronous work checks it before
  // coming back. Made on first use, so one that never dispatched has none.
  std::weak_ptr<bool> liveness() {
    if (!alive_) alive_ = std::make_shared<bool>(true);
    return alive_;
  }
  std::shared_ptr<bool> alive_;
  uint64_t messages_out_ = 0;
  uint64_t bytes_out_ = 0;
  TopicTracing* tracing_ = nullptr;
};

}  // namespace magnetar::broker
