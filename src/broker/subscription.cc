#include "broker/subscription.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>

#include "common/clock.h"
#include "common/logging.h"
#include "runtime/reactor.h"

namespace magnetar::broker {

using common::Result;
using common::Status;
using ledger::LedgerEntry;
using ledger::Position;

std::string_view subscription_type_name(SubscriptionType t) {
  switch (t) {
    case SubscriptionType::kExclusive: return "Exclusive";
    case SubscriptionType::kShared: return "Shared";
    case SubscriptionType::kFailover: return "Failover";
    case SubscriptionType::kKeyShared: return "Key_Shared";
  }
  return "Unknown";
}

namespace {

uint32_t count_bits(const std::vector<uint64_t>& words) {
  uint32_t n = 0;
  for (uint64_t w : words) n += static_cast<uint32_t>(std::popcount(w));
  return n;
}

std::string_view mode_name(KeySharedMode m) { return m == KeySharedMode::kSticky ? "STICKY" : "AUTO_SPLIT"; }

// Pulsar hashes entries without a key as this key.
constexpr std::string_view kNoKey = "NONE_KEY";
}  // namespace

Subscription::Subscription(SubscriptionType type, ledger::Log& log, ledger::Cursor& cursor)
    : log_(log), cursor_(cursor), read_position_(cursor.mark_delete_position()), type_(type), typed_(true) {}

Subscription::Subscription(ledger::Log& log, ledger::Cursor& cursor)
    : log_(log), cursor_(cursor), read_position_(cursor.mark_delete_position()), type_(SubscriptionType::kExclusive),
      typed_(false) {}

Subscription::~Subscription() {
  if (alive_) *alive_ = false;
  release_caught_up(true);
}

void Subscription::when_caught_up(std::function<void()> fn) {
  if (!caught_up_waiters_ && !behind_by_more_than(kLagEntries)) return fn();
  if (!caught_up_waiters_) caught_up_waiters_ = std::make_unique<std::vector<std::function<void()>>>();
  caught_up_waiters_->push_back(std::move(fn));
  schedule_dispatch();  // dispatch releases them once it is close enough
}

bool Subscription::behind_by_more_than(uint64_t entries) {
  if (consumers_.empty() || (limits_apply() && blocked_on_unacked_) || dispatch_rate_limited()) return false;
  Consumer* active = active_consumer();
  const int64_t permits = type_ == SubscriptionType::kShared || type_ == SubscriptionType::kKeyShared
                              ? total_permits()
                          : active != nullptr && has_credit(*active) ? active->permits_
                                                                     : 0;
  if (permits <= 0) return false;
  return log_.chain().entries_after(read_position_) > entries;
}

void Subscription::release_caught_up(bool all) {
  if (!caught_up_waiters_ || (!all && behind_by_more_than(kLagEntries / 2))) return;
  auto waiters = std::move(caught_up_waiters_);
  // After the current call: a callback may publish again, or close things.
  runtime::Reactor* home = runtime::Reactor::current();
  auto run = [waiters = std::shared_ptr<std::vector<std::function<void()>>>(std::move(waiters))]() {
    for (auto& fn : *waiters) fn();
  };
  if (home != nullptr) return home->defer(std::move(run));
  run();
}

Result<Consumer*> Subscription::add_consumer(uint64_t id, ConsumerOptions options, ConsumerSink* sink) {
  if (consumers_.empty()) {
    type_ = options.type;
    typed_ = true;
    failover_active_ = nullptr;
    selector_.reset();
    // What the previous consumers' dispatcher kept aside goes back to the
    // entries to send again, for whichever dispatcher serves the new type.
    for (auto& [p, h] : held_) redeliver_[p] = h.slot;
    held_.clear();
    if (!holds_back_delayed() && delayed_) {
      for (const auto& d : delayed_->index.take_due(INT64_MAX)) redeliver_[d.position] = d.slot;
    }
  }
  if (!consumers_.empty() && options.type != type_) {
    return Status::invalid_argument("subscription '" + name() + "' is " + std::string(subscription_type_name(type_)) +
                                    ", not " + std::string(subscription_type_name(options.type)));
  }
  if (type_ == SubscriptionType::kExclusive && !consumers_.empty()) {
    return Status::failed_precondition("subscription '" + name() + "' is Exclusive and already has a consumer");
  }
  if (consumer(id) != nullptr) return Status::already_exists("consumer id " + std::to_string(id) + " is in use");
  if (type_ == SubscriptionType::kKeyShared) {
    if (!selector_) {
      selector_ = std::make_unique<KeySharedSelector>(options.key_shared_mode);
    } else if (selector_->mode() != options.key_shared_mode) {
      return Status::invalid_argument("subscription '" + name() + "' is Key_Shared " +
                                      std::string(mode_name(selector_->mode())) + ", not " +
                                      std::string(mode_name(options.key_shared_mode)));
    }
    Status st = selector_->add_consumer(id, options.hash_ranges);
    if (!st.is_ok()) {
      if (consumers_.empty()) selector_.reset();
      return st;
    }
  }
  consumers_.push_back(std::make_unique<Consumer>(id, std::move(options), sink));
  Consumer* c = consumers_.back().get();
  if (type_ == SubscriptionType::kFailover) update_failover_active();
  schedule_dispatch();
  return c;
}

Consumer* Subscription::consumer(uint64_t id) {
  for (auto& c : consumers_) {
    if (c->id() == id) return c.get();
  }
  return nullptr;
}

void Subscription::remove_consumer(uint64_t id) {
  auto it = std::find_if(consumers_.begin(), consumers_.end(), [id](const auto& c) { return c->id() == id; });
  if (it == consumers_.end()) return;
  take_back(**it, nullptr);
  if (selector_) selector_->remove_consumer(id);
  if (failover_active_ == it->get()) failover_active_ = nullptr;
  consumers_.erase(it);
  if (type_ == SubscriptionType::kFailover) update_failover_active();
  schedule_dispatch();
}

void Subscription::close_consumers(const Status& why) {
  for (auto& c : consumers_) take_back(*c, nullptr);
  auto consumers = std::move(consumers_);
  consumers_.clear();
  failover_active_ = nullptr;
  selector_.reset();
  for (auto& c : consumers) {
    if (c->sink()) c->sink()->closed(why);
  }
}

void Subscription::update_failover_active() {
  Consumer* best = nullptr;
  for (auto& c : consumers_) {
    if (best == nullptr || c->options().priority < best->options().priority) best = c.get();
  }
  if (best == failover_active_) return;
  Consumer* old = failover_active_;
  failover_active_ = best;
  if (old != nullptr) {
    // What the old active consumer holds goes to the new one, in order.
    take_back(*old, nullptr);
    if (old->sink()) old->sink()->active_changed(false);
  }
  if (best != nullptr && best->sink()) best->sink()->active_changed(true);
}

Consumer* Subscription::active_consumer() {
  if (type_ == SubscriptionType::kExclusive) return consumers_.empty() ? nullptr : consumers_.front().get();
  if (type_ == SubscriptionType::kFailover) return failover_active_;
  return nullptr;
}

bool Subscription::can_take(const Consumer& c) const {
  if (c.permits_ <= 0 || !has_credit(c)) return false;
  return !(limits_apply() && c.blocked_on_unacked_);
}

void Subscription::charge(Consumer& c, const LedgerEntry& e, uint32_t messages) {
  c.permits_ -= messages;
  const int64_t cost = delivery_cost(e.payload.size());
  if (c.credit_bound_) c.credit_ -= cost;
  entry_cost_ = cost >= entry_cost_ ? cost : entry_cost_ - (entry_cost_ - cost) / 8;
}

size_t Subscription::credit_entries(const Consumer* active) const {
  int64_t credit = 0;
  if (type_ == SubscriptionType::kShared || type_ == SubscriptionType::kKeyShared) {
    for (const auto& c : consumers_) {
      if (!can_take(*c)) continue;
      if (!c->credit_bound_) return SIZE_MAX;
      credit += c->credit_;
    }
  } else {
    if (active == nullptr || !active->credit_bound_) return SIZE_MAX;
    credit = active->credit_;
  }
  if (entry_cost_ == 0) return 1;
  return static_cast<size_t>(std::max<int64_t>(1, (credit + entry_cost_ - 1) / entry_cost_));
}

int64_t Subscription::total_permits() const {
  int64_t total = 0;
  for (const auto& c : consumers_) {
    if (can_take(*c)) total += c->permits_;
  }
  return total;
}

void Subscription::flow(uint64_t consumer_id, uint32_t messages) {
  Consumer* c = consumer(consumer_id);
  if (c == nullptr) return;
  c->permits_ += messages;
  schedule_dispatch();
}

void Subscription::add_credit(uint64_t consumer_id, int64_t bytes) {
  Consumer* c = consumer(consumer_id);
  if (c == nullptr || !c->credit_bound_) return;
  c->credit_ += bytes;
  schedule_dispatch();
}

// --- Pending entries and the unacked limits.

void Subscription::add_pending(Consumer& c, Position p, Consumer::Pending pending) {
  auto [it, inserted] = c.pending_.try_emplace(p, pending);
  if (!inserted) {
    drop_pending(c, p);
    it = c.pending_.emplace(p, pending).first;
  }
  c.unacked_messages_ += pending.messages;
  unacked_messages_ += pending.messages;
  ++c.pending_slots_[pending.slot];
  if (!limits_apply()) return;
  if (max_unacked_per_consumer_ > 0 && c.unacked_messages_ >= max_unacked_per_consumer_) {
    c.blocked_on_unacked_ = true;
  }
  if (max_unacked_per_subscription_ > 0 && unacked_messages_ >= max_unacked_per_subscription_) {
    blocked_on_unacked_ = true;
  }
}

void Subscription::drop_pending(Consumer& c, Position p) {
  auto it = c.pending_.find(p);
  if (it == c.pending_.end()) return;
  c.unacked_messages_ -= it->second.messages;
  unacked_messages_ -= it->second.messages;
  auto slot = c.pending_slots_.find(it->second.slot);
  if (slot != c.pending_slots_.end() && --slot->second == 0) c.pending_slots_.erase(slot);
  c.pending_.erase(it);
  after_unacked_drop(c);
}

void Subscription::drop_pending_through(Consumer& c, Position p) {
  while (!c.pending_.empty() && c.pending_.begin()->first <= p) drop_pending(c, c.pending_.begin()->first);
}

void Subscription::after_unacked_drop(Consumer& c) {
  bool wake = type_ == SubscriptionType::kKeyShared;  // a slot may have drained
  if (c.blocked_on_unacked_ && c.unacked_messages_ <= max_unacked_per_consumer_ / 2) {
    c.blocked_on_unacked_ = false;
    wake = true;
  }
  if (blocked_on_unacked_ && unacked_messages_ <= max_unacked_per_subscription_ / 2) {
    blocked_on_unacked_ = false;
    wake = true;
  }
  if (wake) schedule_dispatch();
}

void Subscription::set_unacked_limits(uint64_t per_consumer, uint64_t per_subscription) {
  max_unacked_per_consumer_ = static_cast<uint32_t>(std::min<uint64_t>(per_consumer, UINT32_MAX));
  max_unacked_per_subscription_ = static_cast<uint32_t>(std::min<uint64_t>(per_subscription, UINT32_MAX));
  for (auto& c : consumers_) {
    c->blocked_on_unacked_ = per_consumer > 0 && c->unacked_messages_ >= per_consumer;
  }
  blocked_on_unacked_ = per_subscription > 0 && unacked_messages_ >= per_subscription;
  if (!consumers_.empty()) schedule_dispatch();
}

void Subscription::take_back(Consumer& c, const std::vector<Position>* positions) {
  auto give_back = [&](Position p) {
    auto it = c.pending_.find(p);
    if (it == c.pending_.end()) return;
    redeliver_[p] = it->second.slot;
    redelivery_counts_[p] = it->second.deliveries;
    drop_pending(c, p);
  };
  if (positions == nullptr) {
    while (!c.pending_.empty()) give_back(c.pending_.begin()->first);
  } else {
    for (Position p : *positions) give_back(p);
  }
}

void Subscription::forget_pending(Position p) {
  for (auto& c : consumers_) drop_pending(*c, p);
  redeliver_.erase(p);
  redelivery_counts_.erase(p);
  held_.erase(p);
  if (delayed_) delayed_->index.erase(p);
}

void Subscription::forget_pending_through(Position p) {
  for (auto& c : consumers_) drop_pending_through(*c, p);
  redeliver_.erase(redeliver_.begin(), redeliver_.upper_bound(p));
  redelivery_counts_.erase(redelivery_counts_.begin(), redelivery_counts_.upper_bound(p));
  held_.erase(held_.begin(), held_.upper_bound(p));
  if (delayed_) delayed_->index.erase_through(p);
}

// --- Acknowledgements and redelivery.

void Subscription::trace(TraceStage stage, uint64_t consumer_id, Position p, uint32_t redelivery_count) {
  if (!tracing_->traced(p)) return;
  TraceEvent e;
  e.stage = stage;
  e.time_ms = common::wall_clock_ms();
  e.position = p;
  e.subscription = name();
  e.redelivery_count = redelivery_count;
  record_by(consumer_id, std::move(e));
}

void Subscription::record_by(uint64_t consumer_id, TraceEvent e) {
  e.consumer_id = consumer_id;
  if (const Consumer* c = consumer(consumer_id)) {
    e.consumer_name = c->name();
    e.client_address = c->options().client.address;
    e.protocol = c->options().client.protocol;
  }
  tracing_->record(std::move(e));
}

Status Subscription::ack(uint64_t consumer_id, Position p) {
  Status st = log_.ack(cursor_.name(), p);
  if (st.is_ok()) {
    forget_pending(p);
    if (tracing_ && tracing_->on()) trace(TraceStage::kAcked, consumer_id, p);
  }
  return st;
}

Status Subscription::ack_cumulative(uint64_t consumer_id, Position p) {
  if (type_ == SubscriptionType::kShared || type_ == SubscriptionType::kKeyShared) {
    return Status::invalid_argument("cumulative acknowledgement is not allowed on a " +
                                    std::string(subscription_type_name(type_)) + " subscription");
  }
  Position was = cursor_.mark_delete_position();
  Status st = log_.ack_cumulative(cursor_.name(), p);
  if (st.is_ok()) forget_pending_through(p);
  if (st.is_ok() && tracing_ && tracing_->on() && was < p) {
    record_by(consumer_id, range_event(TraceStage::kAcked, was, p, name(), "cumulative"));
  }
  return st;
}

Status Subscription::ack_through(Position p) {
  Position was = cursor_.mark_delete_position();
  // At or before the mark-delete position, or in a ledger retention dropped: nothing left to acknowledge.
  if (p <= was || log_.chain().find(p.ledger) == nullptr) return Status::ok();
  Status st = log_.ack_cumulative(cursor_.name(), p);
  if (!st.is_ok()) return st;
  forget_pending_through(p);
  if (tracing_ && tracing_->on()) {
    tracing_->record(range_event(TraceStage::kAcked, was, p, name(), "acknowledged on another cluster"));
  }
  return st;
}

Status Subscription::ack_batch_index(uint64_t consumer_id, Position p, uint32_t index, uint32_t batch_size) {
  Status st = log_.ack_batch_index(cursor_.name(), p, index, batch_size);
  if (!st.is_ok()) return st;
  if (cursor_.is_acknowledged(p)) {
    forget_pending(p);
    // One event per batch, when its last message is acknowledged: a
    // client acknowledges each message of a batch on its own.
    if (tracing_ && tracing_->on()) trace(TraceStage::kAcked, consumer_id, p);
    return st;
  }
  // A partly acknowledged batch counts only its unacknowledged messages.
  uint32_t left = batch_size - std::min(batch_size, count_bits(cursor_.batch_acks(p)));
  for (auto& c : consumers_) {
    auto it = c->pending_.find(p);
    if (it == c->pending_.end() || it->second.messages <= left) continue;
    uint32_t drop = it->second.messages - left;
    it->second.messages = left;
    c->unacked_messages_ -= drop;
    unacked_messages_ -= drop;
    after_unacked_drop(*c);
  }
  return st;
}

Status Subscription::ack_batch(uint64_t consumer_id, Position p, const std::vector<uint64_t>& unacked,
                               uint32_t batch_size) {
  if (batch_size == 0) {
    for (const auto& c : consumers_) {
      auto it = c->pending_.find(p);
      if (it != c->pending_.end()) batch_size = it->second.batch_size;
    }
  }
  if (batch_size == 0) {
    return Status::invalid_argument("batch size of " + p.to_string() + " unknown: it is not pending on " + name());
  }
  auto still_unacked = [&](uint32_t i) {
    return i / 64 < unacked.size() && ((unacked[i / 64] >> (i % 64)) & 1) != 0;
  };
  bool any_left = false;
  for (uint32_t i = 0; i < batch_size; ++i) any_left = any_left || still_unacked(i);
  if (!any_left) return ack(consumer_id, p);
  Status result;
  for (uint32_t i = 0; i < batch_size; ++i) {
    if (still_unacked(i)) continue;
    Status st = ack_batch_index(consumer_id, p, i, batch_size);
    if (!st.is_ok()) result = st;
  }
  return result;
}

void Subscription::redeliver_unacknowledged(uint64_t consumer_id, const std::vector<Position>& positions) {
  Consumer* c = consumer(consumer_id);
  if (c == nullptr) return;
  if (tracing_ && tracing_->on()) {
    if (positions.empty()) {
      for (const auto& [p, pending] : c->pending_) trace(TraceStage::kNacked, consumer_id, p);
    } else {
      for (Position p : positions) trace(TraceStage::kNacked, consumer_id, p);
    }
  }
  take_back(*c, positions.empty() ? nullptr : &positions);
  schedule_dispatch();
}

void Subscription::on_entries_added() {
  if (!waiting_for_entries_) return;
  waiting_for_entries_ = false;
  schedule_dispatch();
}

void Subscription::rewind() {
  ++generation_;
  reading_ = false;
  waiting_for_entries_ = false;
  read_position_ = cursor_.mark_delete_position();
  redeliver_.clear();
  redelivery_counts_.clear();
  held_.clear();
  if (delayed_) delayed_->index.clear();
  for (auto& c : consumers_) {
    c->pending_.clear();
    c->pending_slots_.clear();
    c->unacked_messages_ = 0;
    c->blocked_on_unacked_ = false;
  }
  unacked_messages_ = 0;
  blocked_on_unacked_ = false;
  schedule_dispatch();
}

// --- Delayed delivery.

uint32_t Subscription::slot_of(const ledger::MessageHeader& h) const {
  if (type_ != SubscriptionType::kKeyShared) return 0;
  return sticky_key_slot(h.key.empty() ? kNoKey : std::string_view(h.key));
}

bool Subscription::known(Position p) const {
  if (redeliver_.count(p) > 0 || held_.count(p) > 0 || (delayed_ && delayed_->index.contains(p))) return true;
  if (p > highest_delivered_) return false;  // never delivered, so pending nowhere
  for (const auto& c : consumers_) {
    if (c->pending_.count(p) > 0) return true;
  }
  return false;
}

void Subscription::hold_back(Position p, int64_t deliver_at_ms, uint32_t slot) {
  if (!delayed_) delayed_ = std::make_unique<Delayed>();
  delayed_->index.add(p, deliver_at_ms, slot);
  arm_delay_timer();
}

void Subscription::arm_delay_timer() {
  if (!delayed_) return;
  Delayed& d = *delayed_;
  auto next = d.index.next_deliver_at();
  if (!next) return;
  if (d.timer && d.timer->active() && d.timer_at <= *next) return;
  if (!d.timer) d.timer = std::make_unique<runtime::Timer>(*runtime::Reactor::current());
  int64_t wait = std::max<int64_t>(0, *next - common::wall_clock_ms());
  d.timer_at = *next;
  std::weak_ptr<bool> alive = liveness();
  d.timer->once(std::chrono::milliseconds(wait), [this, alive]() {
    // Deferred: re-arming replaces the callback that is running now.
    runtime::Reactor::current()->defer([this, alive]() {
      if (!alive.expired()) on_delay_timer();
    });
  });
}

void Subscription::on_delay_timer() {
  if (!delayed_) return;
  auto due = delayed_->index.take_due(common::wall_clock_ms());
  for (const auto& d : due) {
    if (!cursor_.is_acknowledged(d.position)) redeliver_[d.position] = d.slot;
  }
  if (!due.empty()) schedule_dispatch();
  arm_delay_timer();
}

// --- Dispatch.

void Subscription::schedule_dispatch() {
  if (dispatch_scheduled_) return;
  dispatch_scheduled_ = true;
  runtime::Reactor* home = runtime::Reactor::current();
  std::weak_ptr<bool> alive = liveness();
  // After the current call returns: callers may still be mid-update.
  home->defer([this, alive]() {
    if (alive.expired()) return;
    dispatch_scheduled_ = false;
    dispatch();
  });
}

void Subscription::dispatch() {
  release_caught_up(false);
  if (consumers_.empty() || reading_) return;
  if (limits_apply() && blocked_on_unacked_) return;
  int64_t allowance = dispatch_rate_limited() ? dispatch_allowance() : INT64_MAX;
  if (allowance <= 0) return;  // a retry is armed
  if (type_ == SubscriptionType::kKeyShared) {
    dispatch_key_shared(allowance);
    return;
  }
  Consumer* active = active_consumer();
  int64_t permits = type_ == SubscriptionType::kShared ? total_permits()
                     : active != nullptr && has_credit(*active) ? active->permits_
                                                                : 0;
  if (permits <= 0) return;
  if (!redeliver_.empty()) {
    Position wanted = redeliver_.begin()->first;
    reading_ = true;
    std::weak_ptr<bool> alive = liveness();
    auto reread = [this, alive, wanted, gen = generation_](Result<std::vector<LedgerEntry>> r) {
      if (alive.expired() || gen != generation_) return;
      on_redelivery_read(wanted, std::move(r));
    };
    if (read_compacted_) return log_.read_compacted(before(wanted), 1, std::move(reread));
    log_.read_entries(before(wanted), 1, std::move(reread));
    return;
  }
  reading_ = true;
  size_t n = static_cast<size_t>(
      std::min<int64_t>({permits, static_cast<int64_t>(kMaxReadEntries), allowance}));
  n = std::min(n, credit_entries(active));
  std::weak_ptr<bool> alive = liveness();
  auto read = [this, alive, gen = generation_](Result<std::vector<LedgerEntry>> r) {
    if (alive.expired() || gen != generation_) return;
    on_read(std::move(r));
  };
  if (read_compacted_) return log_.read_compacted(read_position_, n, std::move(read));
  log_.read_entries(read_position_, n, std::move(read));
}

void Subscription::on_redelivery_read(Position wanted, Result<std::vector<LedgerEntry>> result) {
  reading_ = false;
  redeliver_.erase(wanted);
  if (result.is_ok() && !result->empty() && result->front().position == wanted &&
      !cursor_.is_acknowledged(wanted)) {
    std::vector<LedgerEntry> one;
    one.push_back(std::move(result->front()));
    auto left = hand_out(std::move(one));
    if (!left.empty()) redeliver_[wanted] = 0;
  } else if (!result.is_ok()) {
    MLOG_WARN("subscription {}: cannot reread {} for redelivery: {}", name(), wanted.to_string(),
              result.status().to_string());
  }
  schedule_dispatch();
}

bool Subscription::take_read(const Result<std::vector<LedgerEntry>>& result) {
  if (!result.is_ok()) {
    // Try again when the topic next grows; a read error is the storage's to report.
    MLOG_WARN("subscription {}: read after {} failed: {}", name(), read_position_.to_string(),
              result.status().to_string());
    waiting_for_entries_ = true;
    return false;
  }
  if (result->empty()) {
    waiting_for_entries_ = true;
    return false;
  }
  read_position_ = result->back().position;
  return true;
}

void Subscription::on_read(Result<std::vector<LedgerEntry>> result) {
  reading_ = false;
  if (!take_read(result)) return;
  int64_t now = common::wall_clock_ms();
  std::vector<LedgerEntry> fresh;
  fresh.reserve(result->size());
  for (auto& e : *result) {
    if (cursor_.is_acknowledged(e.position) || known(e.position)) continue;
    if (holds_back_delayed() && e.header.deliver_at_ms > now) {
      hold_back(e.position, e.header.deliver_at_ms, 0);
      continue;
    }
    fresh.push_back(std::move(e));
  }
  auto left = hand_out(std::move(fresh));
  if (!left.empty()) read_position_ = before(left.front().position);  // read them again later
  schedule_dispatch();
}

uint32_t Subscription::unacked_messages_of(const LedgerEntry& e) const {
  uint32_t acked = count_bits(cursor_.batch_acks(e.position));
  return e.header.messages > acked ? e.header.messages - acked : 1;
}

uint64_t Subscription::consumer_room(const Consumer& c) const {
  if (!limits_apply() || max_unacked_per_consumer_ == 0) return UINT64_MAX;
  return max_unacked_per_consumer_ - std::min<uint64_t>(max_unacked_per_consumer_, c.unacked_messages_);
}

uint64_t Subscription::subscription_room() const {
  if (!limits_apply() || max_unacked_per_subscription_ == 0) return UINT64_MAX;
  return max_unacked_per_subscription_ - std::min<uint64_t>(max_unacked_per_subscription_, unacked_messages_);
}

std::vector<LedgerEntry> Subscription::hand_out(std::vector<LedgerEntry> entries) {
  size_t next = 0;
  uint64_t sub_room = subscription_room();
  auto take_for = [&](Consumer& c) {
    if (!can_take(c)) return;
    uint64_t room = std::min(consumer_room(c), sub_room);
    std::vector<LedgerEntry> batch;
    while (next < entries.size() && c.permits_ > 0 && has_credit(c) && room > 0) {
      uint32_t messages = unacked_messages_of(entries[next]);
      charge(c, entries[next], messages);
      room -= std::min<uint64_t>(room, messages);
      if (sub_room != UINT64_MAX) sub_room -= std::min<uint64_t>(sub_room, messages);
      batch.push_back(std::move(entries[next++]));
    }
    if (!batch.empty()) deliver(c, batch);
  };
  if (type_ == SubscriptionType::kShared) {
    for (size_t tried = 0; tried < consumers_.size() && next < entries.size(); ++tried) {
      Consumer& c = *consumers_[round_robin_++ % consumers_.size()];
      take_for(c);
    }
  } else if (Consumer* active = active_consumer()) {
    take_for(*active);
  }
  return std::vector<LedgerEntry>(std::make_move_iterator(entries.begin() + static_cast<std::ptrdiff_t>(next)),
                                  std::make_move_iterator(entries.end()));
}

void Subscription::deliver(Consumer& c, std::vector<LedgerEntry>& batch) {
  std::vector<Delivery> out;
  out.reserve(batch.size());
  const uint64_t messages_before = messages_out_;
  const uint64_t bytes_before = bytes_out_;
  const bool tracing = tracing_ && tracing_->on();
  for (auto& e : batch) {
    uint32_t count = 0;
    if (auto it = redelivery_counts_.find(e.position); it != redelivery_counts_.end()) {
      count = it->second;
      redelivery_counts_.erase(it);
    }
    if (tracing) trace(TraceStage::kDispatched, c.id(), e.position, count);
    Consumer::Pending pending;
    pending.deliveries = count + 1;
    pending.messages = unacked_messages_of(e);
    pending.slot = slot_of(e.header);
    pending.batch_size = e.header.messages;
    add_pending(c, e.position, pending);
    highest_delivered_ = std::max(highest_delivered_, e.position);
    c.messages_out_ += e.header.messages;
    c.bytes_out_ += e.payload.size();
    messages_out_ += e.header.messages;
    bytes_out_ += e.payload.size();
    Delivery d;
    d.position = e.position;
    d.redelivery_count = count;
    d.batch_acks = cursor_.batch_acks(e.position);
    d.header = std::move(e.header);
    d.payload = std::move(e.payload);
    out.push_back(std::move(d));
  }
  // What the loop counted is what the dispatch rate is charged.
  if (dispatch_rate_limited()) {
    charge_dispatch(static_cast<int64_t>(messages_out_ - messages_before),
                    static_cast<int64_t>(bytes_out_ - bytes_before));
  }
  if (c.sink()) c.sink()->deliver(std::move(out));
}

SubscriptionStats Subscription::stats() const {
  SubscriptionStats s;
  s.name = name();
  s.type = type_;
  s.typed = typed_;
  s.mark_delete = cursor_.mark_delete_position();
  s.read_position = read_position_;
  for (const auto& c : consumers_) {
    ConsumerStats cs;
    cs.consumer_id = c->id();
    cs.consumer_name = c->name();
    cs.client = c->options().client;
    cs.permits = c->permits();
    cs.unacked_entries = c->unacked_entries();
    cs.unacked_messages = c->unacked_messages();
    cs.blocked_on_unacked = limits_apply() && c->blocked_on_unacked();
    if (selector_) cs.hash_ranges = selector_->ranges_of(c->id());
    cs.messages_out = c->messages_out();
    cs.bytes_out = c->bytes_out();
    s.consumer_list.push_back(std::move(cs));
  }
  s.backlog_entries = cursor_.backlog_entries(log_.chain());
  s.backlog_messages = cursor_.backlog_messages(log_.chain());
  s.messages_out = messages_out_;
  s.bytes_out = bytes_out_;
  s.dispatch_rate_limited_times = dispatch_rate_limited_times();
  for (const auto& c : consumers_) s.unacked_entries += c->pending_.size();
  s.unacked_messages = unacked_messages_;
  s.delayed_entries = delayed_ ? delayed_->index.size() : 0;
  s.blocked_on_unacked = limits_apply() && blocked_on_unacked_;
  s.consumers = consumers_.size();
  s.durable = cursor_.durable();
  s.replicated = cursor_.replicated();
  return s;
}

}  // namespace magnetar::broker
