#include "broker/subscription.h"

#include <algorithm>

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
// The position just before p, as read_entries() takes it.
Position before(Position p) { return Position{p.ledger, p.entry - 1}; }
}  // namespace

Subscription::Subscription(std::string name, SubscriptionType type, ledger::Log& log, ledger::Cursor& cursor)
    : name_(std::move(name)), type_(type), typed_(true), log_(log), cursor_(cursor),
      read_position_(cursor.mark_delete_position()) {}

Subscription::Subscription(std::string name, ledger::Log& log, ledger::Cursor& cursor)
    : name_(std::move(name)), type_(SubscriptionType::kExclusive), typed_(false), log_(log), cursor_(cursor),
      read_position_(cursor.mark_delete_position()) {}

Subscription::~Subscription() { *alive_ = false; }

Result<Consumer*> Subscription::add_consumer(uint64_t id, ConsumerOptions options, ConsumerSink* sink) {
  if (options.type == SubscriptionType::kKeyShared) {
    return Status::unimplemented("Key_Shared subscriptions are not served yet");
  }
  if (consumers_.empty()) {
    type_ = options.type;
    typed_ = true;
    failover_active_ = nullptr;
  }
  if (!consumers_.empty() && options.type != type_) {
    return Status::invalid_argument("subscription '" + name_ + "' is " + std::string(subscription_type_name(type_)) +
                                    ", not " + std::string(subscription_type_name(options.type)));
  }
  if (type_ == SubscriptionType::kExclusive && !consumers_.empty()) {
    return Status::failed_precondition("subscription '" + name_ + "' is Exclusive and already has a consumer");
  }
  if (consumer(id) != nullptr) return Status::already_exists("consumer id " + std::to_string(id) + " is in use");
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
  for (const auto& [p, count] : (*it)->pending_) {
    redeliver_.insert(p);
    redelivery_counts_[p] = count;
  }
  if (failover_active_ == it->get()) failover_active_ = nullptr;
  consumers_.erase(it);
  if (type_ == SubscriptionType::kFailover) update_failover_active();
  schedule_dispatch();
}

void Subscription::close_consumers(const Status& why) {
  auto consumers = std::move(consumers_);
  consumers_.clear();
  failover_active_ = nullptr;
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
    for (const auto& [p, count] : old->pending_) {
      redeliver_.insert(p);
      redelivery_counts_[p] = count;
    }
    old->pending_.clear();
    if (old->sink()) old->sink()->active_changed(false);
  }
  if (best != nullptr && best->sink()) best->sink()->active_changed(true);
}

Consumer* Subscription::active_consumer() {
  if (type_ == SubscriptionType::kExclusive) return consumers_.empty() ? nullptr : consumers_.front().get();
  if (type_ == SubscriptionType::kFailover) return failover_active_;
  return nullptr;
}

int64_t Subscription::total_permits() const {
  int64_t total = 0;
  for (const auto& c : consumers_) total += std::max<int64_t>(c->permits_, 0);
  return total;
}

void Subscription::flow(uint64_t consumer_id, uint32_t messages) {
  Consumer* c = consumer(consumer_id);
  if (c == nullptr) return;
  c->permits_ += messages;
  schedule_dispatch();
}

void Subscription::forget_pending(Position p) {
  for (auto& c : consumers_) c->pending_.erase(p);
  redeliver_.erase(p);
  redelivery_counts_.erase(p);
}

void Subscription::forget_pending_through(Position p) {
  for (auto& c : consumers_) c->pending_.erase(c->pending_.begin(), c->pending_.upper_bound(p));
  redeliver_.erase(redeliver_.begin(), redeliver_.upper_bound(p));
  redelivery_counts_.erase(redelivery_counts_.begin(), redelivery_counts_.upper_bound(p));
}

Status Subscription::ack(uint64_t, Position p) {
  Status st = log_.ack(cursor_.name(), p);
  if (st.is_ok()) forget_pending(p);
  return st;
}

Status Subscription::ack_cumulative(uint64_t, Position p) {
  if (type_ == SubscriptionType::kShared || type_ == SubscriptionType::kKeyShared) {
    return Status::invalid_argument("cumulative acknowledgement is not allowed on a " +
                                    std::string(subscription_type_name(type_)) + " subscription");
  }
  Status st = log_.ack_cumulative(cursor_.name(), p);
  if (st.is_ok()) forget_pending_through(p);
  return st;
}

Status Subscription::ack_batch_index(uint64_t, Position p, uint32_t index, uint32_t batch_size) {
  Status st = log_.ack_batch_index(cursor_.name(), p, index, batch_size);
  if (st.is_ok() && cursor_.is_acknowledged(p)) forget_pending(p);
  return st;
}

void Subscription::redeliver_unacknowledged(uint64_t consumer_id, const std::vector<Position>& positions) {
  Consumer* c = consumer(consumer_id);
  if (c == nullptr) return;
  auto move = [&](Position p) {
    auto it = c->pending_.find(p);
    if (it == c->pending_.end()) return;
    redeliver_.insert(p);
    redelivery_counts_[p] = it->second;
    c->pending_.erase(it);
  };
  if (positions.empty()) {
    auto all = c->pending_;
    for (const auto& [p, count] : all) move(p);
  } else {
    for (Position p : positions) move(p);
  }
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
  for (auto& c : consumers_) c->pending_.clear();
  schedule_dispatch();
}

void Subscription::schedule_dispatch() {
  if (dispatch_scheduled_) return;
  dispatch_scheduled_ = true;
  runtime::Reactor* home = runtime::Reactor::current();
  std::weak_ptr<bool> alive = alive_;
  // After the current call returns: callers may still be mid-update.
  home->defer([this, alive]() {
    if (alive.expired()) return;
    dispatch_scheduled_ = false;
    dispatch();
  });
}

void Subscription::dispatch() {
  if (consumers_.empty() || reading_) return;
  Consumer* active = active_consumer();
  int64_t permits = type_ == SubscriptionType::kShared ? total_permits()
                                                       : (active != nullptr ? active->permits_ : 0);
  if (permits <= 0) return;
  if (!redeliver_.empty()) {
    Position wanted = *redeliver_.begin();
    reading_ = true;
    std::weak_ptr<bool> alive = alive_;
    log_.read_entries(before(wanted), 1, [this, alive, wanted, gen = generation_](Result<std::vector<LedgerEntry>> r) {
      if (alive.expired() || gen != generation_) return;
      on_redelivery_read(wanted, std::move(r));
    });
    return;
  }
  reading_ = true;
  size_t n = static_cast<size_t>(std::min<int64_t>(permits, static_cast<int64_t>(kMaxReadEntries)));
  std::weak_ptr<bool> alive = alive_;
  log_.read_entries(read_position_, n, [this, alive, gen = generation_](Result<std::vector<LedgerEntry>> r) {
    if (alive.expired() || gen != generation_) return;
    on_read(std::move(r));
  });
}

void Subscription::on_redelivery_read(Position wanted, Result<std::vector<LedgerEntry>> result) {
  reading_ = false;
  redeliver_.erase(wanted);
  if (result.is_ok() && !result->empty() && result->front().position == wanted &&
      !cursor_.is_acknowledged(wanted)) {
    std::vector<LedgerEntry> one;
    one.push_back(std::move(result->front()));
    auto left = hand_out(std::move(one), /*redelivery=*/true);
    if (!left.empty()) redeliver_.insert(wanted);
  } else if (!result.is_ok()) {
    MLOG_WARN("subscription {}: cannot reread {} for redelivery: {}", name_, wanted.to_string(),
              result.status().to_string());
  }
  schedule_dispatch();
}

void Subscription::on_read(Result<std::vector<LedgerEntry>> result) {
  reading_ = false;
  if (!result.is_ok()) {
    // Try again when the topic next grows; a read error is the storage's to report.
    MLOG_WARN("subscription {}: read after {} failed: {}", name_, read_position_.to_string(),
              result.status().to_string());
    waiting_for_entries_ = true;
    return;
  }
  if (result->empty()) {
    waiting_for_entries_ = true;
    return;
  }
  read_position_ = result->back().position;
  std::vector<LedgerEntry> fresh;
  fresh.reserve(result->size());
  for (auto& e : *result) {
    if (!cursor_.is_acknowledged(e.position)) fresh.push_back(std::move(e));
  }
  auto left = hand_out(std::move(fresh), /*redelivery=*/false);
  if (!left.empty()) read_position_ = before(left.front().position);  // read them again later
  schedule_dispatch();
}

std::vector<LedgerEntry> Subscription::hand_out(std::vector<LedgerEntry> entries, bool redelivery) {
  size_t next = 0;
  auto take_for = [&](Consumer& c) {
    std::vector<LedgerEntry> batch;
    while (next < entries.size() && c.permits_ > 0) {
      c.permits_ -= entries[next].header.messages;
      batch.push_back(std::move(entries[next++]));
    }
    if (!batch.empty()) deliver(c, batch, redelivery);
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

void Subscription::deliver(Consumer& c, std::vector<LedgerEntry>& batch, bool redelivery) {
  std::vector<Delivery> out;
  out.reserve(batch.size());
  for (auto& e : batch) {
    uint32_t count = 0;
    if (redelivery) {
      auto it = redelivery_counts_.find(e.position);
      count = it == redelivery_counts_.end() ? 1 : it->second;
      redelivery_counts_.erase(e.position);
    }
    c.pending_[e.position] = count + 1;
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
  if (c.sink()) c.sink()->deliver(std::move(out));
}

SubscriptionStats Subscription::stats() const {
  SubscriptionStats s;
  s.name = name_;
  s.type = type_;
  s.typed = typed_;
  s.mark_delete = cursor_.mark_delete_position();
  s.read_position = read_position_;
  for (const auto& c : consumers_) {
    ConsumerStats cs;
    cs.consumer_id = c->id();
    cs.consumer_name = c->name();
    cs.permits = c->permits();
    cs.unacked_entries = c->unacked_entries();
    cs.messages_out = c->messages_out();
    cs.bytes_out = c->bytes_out();
    s.consumer_list.push_back(std::move(cs));
  }
  s.backlog_entries = cursor_.backlog_entries(log_.chain());
  s.backlog_messages = cursor_.backlog_messages(log_.chain());
  s.messages_out = messages_out_;
  s.bytes_out = bytes_out_;
  for (const auto& c : consumers_) s.unacked_entries += c->pending_.size();
  s.consumers = consumers_.size();
  s.durable = cursor_.durable();
  return s;
}

}  // namespace magnetar::broker
