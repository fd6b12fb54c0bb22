// Topic's producer side: admission by access mode, deduplication, the
// backlog quota and the publish path (topic.h).
#include "common/clock.h"
#include "broker/topic.h"
#include "broker/lease_gate.h"

#include "broker/backlog_quota.h"
#include "common/logging.h"
#include "ledger/managed_ledger.h"
#include "runtime/reactor.h"

namespace magnetar::broker {

using common::Result;
using common::Status;
using ledger::Position;

Status Topic::system_topic_refusal() const {
  return Status::permission_denied(name_.to_string() + " holds the namespace's message traces, kept by the broker; "
                                   "read them with GET .../{topic}/trace or magnetar trace");
}

Status Topic::name_in_use(const std::string& name) const {
  auto busy = Status::already_exists("producer '" + name + "' is already connected to " + name_.to_string());
  for (const auto& [id, p] : producers_) {
    if (p.name == name) return busy;
  }
  if (cold_) {
    for (const auto& [id, w] : cold_->waiting_producers) {
      if (w.options.name == name) return busy;
    }
  }
  return Status::ok();
}

Status Topic::add_producer(uint64_t producer_id, const std::string& producer_name, ClientInfo client) {
  auto answer = std::make_shared<std::optional<Status>>();
  add_producer(ProducerOptions{producer_id, producer_name, ProducerAccessMode::kShared, std::move(client)}, nullptr,
               [answer](Result<ProducerAdmission> r) { *answer = r.is_ok() ? Status::ok() : r.status(); });
  return answer->value_or(Status::ok());  // still recovering deduplication: registered already
}

void Topic::add_producer(ProducerOptions options, std::function<void()> waiting,
                         ledger::Callback<Result<ProducerAdmission>> done) {
  if (closed_) return done(Status::unavailable("topic " + name_.to_string() + " is closed"));
  if (options.name.empty()) return done(Status::invalid_argument("a producer needs a name"));
  if (is_trace_topic(name_)) return done(system_topic_refusal());
  if (Status st = name_in_use(options.name); !st.is_ok()) return done(st);
  const size_t waiting_count = cold_ ? cold_->waiting_producers.size() : 0;
  if (producers_.count(options.id) > 0 || (cold_ && cold_->waiting_producers.count(options.id) > 0)) {
    return done(Status::already_exists("producer id " + std::to_string(options.id) + " is in use"));
  }
  refresh_policies();
  check_backlog_quota();
  if (quota_block() != QuotaBlock::kNone) return done(quota_refusal());
  if (max_producers_ > 0 && producers_.size() + waiting_count >= max_producers_) {
    return done(Status::limit_reached("Topic reached max producers limit"));  // Pulsar's words
  }
  auto slot = take_tenant_slot(&TenantCounters::producers);
  if (!slot.is_ok()) return done(slot.status());
  switch (cold().access.decide(options.access_mode)) {
    case ProducerAccess::Decision::kRefuseBusy:
      return done(Status::already_exists("topic " + name_.to_string() + " has an exclusive producer"));
    case ProducerAccess::Decision::kRefuseFenced:
      return done(Status(common::ErrorCode::kFenced, "topic " + name_.to_string() + " has other producers"));
    case ProducerAccess::Decision::kWait: {
      uint64_t id = options.id;
      cold_->access.wait(id);
      cold_->waiting_producers.emplace(id, WaitingProducer{std::move(options), std::move(slot).value(), std::move(done)});
      if (waiting) waiting();
      return;
    }
    case ProducerAccess::Decision::kAdmitAndFence: {
      std::vector<uint64_t> others;
      for (const auto& [id, p] : producers_) others.push_back(id);
      for (uint64_t id : others) {
        close_producer(id, Status(common::ErrorCode::kFenced, "fenced by an exclusive producer"));
      }
      break;
    }
    case ProducerAccess::Decision::kAdmit:
      break;
  }
  admit(std::move(options), std::move(slot).value(), std::move(done));
}

Result<TenantSlot> Topic::take_tenant_slot(TenantSlot::Counter counter) const {
  auto limits = context_.tenant_limits ? context_.tenant_limits(name_.ns.tenant) : nullptr;
  const bool producers = counter == &TenantCounters::producers;
  const int64_t max = limits == nullptr ? -1 : producers ? limits->max_producers : limits->max_consumers;
  std::shared_ptr<TenantCounters> counters =
      tenant_ ? std::shared_ptr<TenantCounters>(tenant_, &tenant_->usage) : nullptr;
  auto slot = TenantSlot::take(std::move(counters), counter, max, name_.ns.tenant, producers ? "producers" : "consumers");
  if (!slot.is_ok()) return Status::limit_reached(slot.status().message());  // as the topic's own limits
  return slot;
}

void Topic::admit(ProducerOptions options, TenantSlot slot, ledger::Callback<Result<ProducerAdmission>> done) {
  uint64_t id = options.id;
  std::string name = options.name;
  cold().access.admitted(id, options.access_mode);
  Producer p;
  p.name = options.name;
  p.access_mode = options.access_mode;
  p.client = options.client;
  // A Kafka or AMQP producer's sequence ids are its connection's own count (topic.h, HeldPublish).
  p.own_sequence = p.client.protocol != "kafka" && p.client.protocol != "amqp";
  p.on_closed = std::move(options.on_closed);
  p.tenant_slot = std::move(slot);
  producers_.emplace(id, std::move(p));
  publish_limits();  // held from now on, so its publishRateLimitedTimes counts while loaded
  uint64_t epoch = cold_->access.epoch();
  std::weak_ptr<bool> alive = alive_;
  when_dedup_ready([this, alive, name, epoch, done = std::move(done)]() {
    ProducerAdmission a;
    a.topic_epoch = epoch;
    if (!alive.expired() && dedup_) a.last_sequence_id = dedup_->state().last_sequence_id(name);
    done(a);
  });
}

void Topic::when_dedup_ready(std::function<void()> fn) {
  if (dedup_ && !dedup_->ready()) {
    cold().dedup_waiters.push_back(std::move(fn));
    return;
  }
  fn();
}

void Topic::admit_waiting() {
  if (!cold_) return;
  while (auto next = cold_->access.next_waiting()) {
    auto it = cold_->waiting_producers.find(*next);
    if (it == cold_->waiting_producers.end()) {
      cold_->access.removed(*next);
      continue;
    }
    WaitingProducer w = std::move(it->second);
    cold_->waiting_producers.erase(it);
    admit(std::move(w.options), std::move(w.tenant_slot), std::move(w.done));
    return;
  }
}

void Topic::remove_producer(uint64_t producer_id) {
  producers_.erase(producer_id);
  if (cold_) {
    cold_->waiting_producers.erase(producer_id);
    cold_->access.removed(producer_id);
  }
  if (!closed_) admit_waiting();
}

void Topic::close_producer(uint64_t id, const Status& why) {
  auto it = producers_.find(id);
  if (it == producers_.end()) return;
  auto on_closed = std::move(it->second.on_closed);
  producers_.erase(it);
  if (cold_) cold_->access.removed(id);
  if (on_closed) on_closed(why);
}

void Topic::refresh_policies() {
  if (!context_.policies) return;
  if (auto p = context_.policies(name_)) apply_policies(*p);
}

PublishLimits* Topic::publish_limits() {
  if (!publish_limits_ && context_.publish_limits) publish_limits_ = context_.publish_limits(name_);
  return publish_limits_.get();
}

void Topic::maintain_producers() {
  if (closed_) return;
  refresh_policies();
  check_backlog_quota();
  check_backlog_age();
  if (dedup_) dedup_->snapshot_if_behind();
  drop_abandoned_readers();
  check_compaction();
}

uint64_t Topic::backlog_bytes() const {
  uint64_t most = 0;
  for (const auto& [name, sub] : subscriptions_) {
    ledger::Cursor& c = sub.cursor();
    if (!c.durable()) continue;
    most = std::max(most, backlog_bytes_after(log_->chain(), c.mark_delete_position()));
  }
  return most;
}

void Topic::check_backlog_age() {
  if (!cold_) return;  // no age quota was ever set
  Cold& c = *cold_;
  if (closed_ || !c.age_quota || c.age_quota->limit_time < 0) {
    c.age_exceeded = false;
    return;
  }
  if (c.age_checking) return;
  // The oldest backlog entry of each durable subscription: the one right
  // after its mark-delete position.
  std::vector<ledger::Position> firsts;
  for (const auto& [name, sub] : subscriptions_) {
    ledger::Cursor& c = sub.cursor();
    if (c.durable() && log_->chain().entries_after(c.mark_delete_position()) > 0) {
      firsts.push_back(c.mark_delete_position());
    }
  }
  if (firsts.empty()) {
    c.age_exceeded = false;
    check_backlog_quota();
    return;
  }
  c.age_checking = true;
  struct Scan {
    size_t left;
    int64_t oldest_ms = 0;  // 0: none known
  };
  auto scan = std::make_shared<Scan>(Scan{firsts.size()});
  std::weak_ptr<bool> alive = alive_;
  for (Position after : firsts) {
    log_->read_entries(after, 1, [this, alive, scan](Result<std::vector<ledger::LedgerEntry>> r) {
      if (r.is_ok() && !r->empty()) {
        int64_t t = r->front().header.publish_time_ms;
        if (t > 0 && (scan->oldest_ms == 0 || t < scan->oldest_ms)) scan->oldest_ms = t;
      }
      if (--scan->left > 0 || alive.expired()) return;
      Cold& c = cold();
      c.age_checking = false;
      if (!c.age_quota) return;
      int64_t now_ms = common::wall_clock_ms();
      c.age_exceeded = over_age_quota(*c.age_quota, scan->oldest_ms, now_ms);
      check_backlog_quota();
    });
  }
}

void Topic::act_on_quota(const BacklogQuota& quota, bool by_age) {
  switch (quota.action) {
    case BacklogQuotaAction::kConsumerBacklogEviction: {
      auto* ml = dynamic_cast<ledger::ManagedLedger*>(log_.get());
      for (const auto& [name, sub] : subscriptions_) {
        ledger::Cursor& c = sub.cursor();
        if (!c.durable()) continue;
        if (by_age) {
          if (ml == nullptr) continue;
          int64_t now_ms = common::wall_clock_ms();
          ml->expire_cursor(name, now_ms - quota.limit_time * 1000, [topic = name_.to_string(), name](Status st) {
            if (!st.is_ok()) MLOG_WARN("topic {}: evicting old backlog of {}: {}", topic, name, st.to_string());
          });
          continue;
        }
        auto limit = static_cast<uint64_t>(quota.limit_size);
        if (auto point = eviction_point(log_->chain(), c.mark_delete_position(), limit)) {
          Status st = log_->ack_cumulative(name, *point);
          if (!st.is_ok()) {
            MLOG_WARN("topic {}: evicting backlog of {}: {}", name_.to_string(), name, st.to_string());
          }
        }
      }
      if (by_age) cold().age_exceeded = false;  // until the next check says otherwise
      break;
    }
    case BacklogQuotaAction::kProducerRequestHold:
      quota_block_ = QuotaBlock::kHold;
      break;
    case BacklogQuotaAction::kProducerException: {
      quota_block_ = QuotaBlock::kException;
      std::vector<uint64_t> ids;
      for (const auto& [id, p] : producers_) ids.push_back(id);
      for (uint64_t id : ids) {
        close_producer(id, Status::resource_exhausted("backlog quota exceeded on " + name_.to_string()));
      }
      break;
    }
  }
}

Status Topic::quota_refusal() const {
  if (storage_exceeded()) {
    return Status::resource_exhausted("Tenant " + name_.ns.tenant + " reached its storage quota");
  }
  return Status::resource_exhausted("backlog quota exceeded on " + name_.to_string());
}

void Topic::check_backlog_quota() {
  if (closed_) return;
  QuotaBlock before = quota_block_;
  quota_block_ = QuotaBlock::kNone;
  if (cold_) {
    // Copies: acting on a quota may change them.
    const std::optional<BacklogQuota> size_quota = cold_->size_quota;
    if (size_quota && over_size_quota(*size_quota, backlog_bytes())) act_on_quota(*size_quota, false);
    const std::optional<BacklogQuota> age_quota = cold_->age_quota;
    if (quota_block_ == QuotaBlock::kNone && cold_->age_exceeded && age_quota) act_on_quota(*age_quota, true);
  }
  if (before == QuotaBlock::kHold && quota_block_ != QuotaBlock::kHold) release_held();
  if (quota_block_ == QuotaBlock::kHold) hold_retry_timer();
}

void Topic::hold_retry_timer() {
  auto& timer = cold().hold_timer;
  if (timer && timer->active()) return;
  runtime::Reactor* home = runtime::Reactor::current();
  if (home == nullptr) return;
  if (!timer) timer = std::make_unique<runtime::Timer>(*home);
  std::weak_ptr<bool> alive = alive_;
  timer->once(std::chrono::seconds(1), [this, alive]() {
    if (alive.expired()) return;
    check_backlog_quota();
    check_backlog_age();
  });
}

void Topic::PublishDone::operator()(Result<ledger::AppendedEntry> r) const {
  if (appended) return appended(std::move(r));
  if (r.is_ok()) return position(r->position);
  position(r.status());
}

void Topic::publish(uint64_t producer_id, ledger::MessageHeader header, common::Slice payload,
                    ledger::Callback<Result<Position>> done, int64_t highest_sequence_id) {
  publish(producer_id, std::move(header), std::move(payload), PublishDone{std::move(done), nullptr},
          highest_sequence_id);
}

void Topic::publish_appended(uint64_t producer_id, ledger::MessageHeader header, common::Slice payload,
                             ledger::Callback<Result<ledger::AppendedEntry>> done) {
  publish(producer_id, std::move(header), std::move(payload), PublishDone{nullptr, std::move(done)}, -1);
}

std::string Topic::too_large(size_t bytes) const {
  return "a message of " + std::to_string(bytes) + " bytes is over tenant " + name_.ns.tenant +
         "'s max message size (" + std::to_string(max_message_bytes()) + " bytes)";
}

void Topic::publish(uint64_t producer_id, ledger::MessageHeader header, common::Slice payload, PublishDone done,
                    int64_t highest_sequence_id) {
  auto it = producers_.find(producer_id);
  if (it == producers_.end()) {
    done(Status::not_found("no producer " + std::to_string(producer_id) + " on " + name_.to_string()));
    return;
  }
  if (closed_) {
    done(Status::unavailable("topic " + name_.to_string() + " is closed"));
    return;
  }
  if (const int64_t max = max_message_bytes(); max >= 0 && static_cast<int64_t>(payload.size()) > max) {
    done(Status::failed_precondition(too_large(payload.size())));
    return;
  }
  if (quota_block() == QuotaBlock::kException) {
    done(quota_refusal());
    return;
  }
  header.producer = it->second.name;
  HeldPublish p{producer_id, std::move(header), std::move(payload), std::move(done), highest_sequence_id};
  p.own_sequence = it->second.own_sequence;
  if (tracing_on()) p.received_ms = common::wall_clock_ms();
  bool hold = (cold_ && !cold_->held.empty()) || quota_block_ == QuotaBlock::kHold || (dedup_ && !dedup_->ready());
  if (hold) {
    common::Fifo<HeldPublish>& held = cold().held;
    if (held.size() >= kMaxHeldPublishes) {
      p.done(Status::resource_exhausted("too many messages held on " + name_.to_string()));
      return;
    }
    held.push_back(std::move(p));
    return;
  }
  store_entry(std::move(p));
}

void Topic::release_held() {
  if (!cold_) return;
  common::Fifo<HeldPublish>& held = cold_->held;
  while (!held.empty() && quota_block_ != QuotaBlock::kHold && !(dedup_ && !dedup_->ready()) && !closed_) {
    HeldPublish p = std::move(held.front());
    held.pop_front();
    if (producers_.count(p.producer_id) == 0) {
      p.done(Status::not_found("producer " + std::to_string(p.producer_id) + " left " + name_.to_string()));
      continue;
    }
    store_entry(std::move(p));
  }
}

void Topic::store_entry(HeldPublish p) {
  // The producer's name is needed past this point only by deduplication:
  // without it, no copy per entry.
  const std::string producer = dedup_ ? p.header.producer : std::string();
  int64_t highest = highest_sequence_id(p.header.sequence_id, p.highest_sequence_id, p.header.messages);
  // A chunk before a message's last is stored as it comes: the message's
  // sequence id is judged and recorded with its last chunk (Pulsar's rule).
  const bool judged = dedup_ != nullptr && p.own_sequence && !p.header.more_chunks && dedup_->judges(producer);
  if (judged) {
    switch (dedup_->state().check(producer, p.header.sequence_id)) {
      case DedupVerdict::kDuplicate:
        p.done(ledger::AppendedEntry{kDuplicatePosition, -1});
        return;
      case DedupVerdict::kMaybeDuplicate:
        p.done(Status::failed_precondition("sequence id " + std::to_string(p.header.sequence_id) +
                                           " of producer " + producer + " is still being stored"));
        return;
      case DedupVerdict::kNew:
        dedup_->state().pushed(producer, highest);
        break;
    }
  }
  uint64_t producer_id = p.producer_id;
  uint32_t messages = p.header.messages;
  size_t bytes = p.payload.size();
  std::weak_ptr<bool> alive = alive_;
  Deduplication* dedup_at_push = judged ? dedup_.get() : nullptr;
  // Traced topics keep what the received event needs until the entry is stored.
  int64_t received_ms = p.received_ms;
  std::optional<std::pair<ledger::MessageHeader, common::Slice>> traced;
  if (received_ms != 0) traced.emplace(p.header, p.payload);
  log_->add_entry(std::move(p.header), std::move(p.payload),
                  [this, alive, producer_id, producer, highest, dedup_at_push, messages, bytes, received_ms,
                   traced = std::move(traced), done = std::move(p.done)](Result<ledger::AppendedEntry> r) {
                    if (!alive.expired()) {
                      if (dedup_ && dedup_.get() == dedup_at_push) {
                        if (r.is_ok()) {
                          dedup_->state().persisted(producer, highest, r->position);
                          dedup_->on_persisted();
                        } else {
                          dedup_->state().forget_pushed(producer);
                        }
                      }
                      if (r.is_ok()) {
                        messages_in_ += messages;
                        bytes_in_ += bytes;
                        auto p = producers_.find(producer_id);
                        if (p != producers_.end()) {
                          p->second.messages_in += messages;
                          p->second.bytes_in += bytes;
                        }
                        if (traced && tracing_on()) {
                          trace_stored(r->position, received_ms, producer_id, traced->first, traced->second);
                        }
                        for (auto& [name, sub] : subscriptions_) sub.on_entries_added();
                        if (cold_) {
                          for (auto& [key, a] : cold_->attachments) a->on_entries_added();
                        }
                        if (cold_ && !cold_->entry_waiters.empty()) {
                          auto waiters = std::move(cold_->entry_waiters);
                          cold_->entry_waiters.clear();
                          for (auto& [key, fn] : waiters) fn();
                        }
                        if (cold_ && (cold_->size_quota || cold_->age_exceeded)) check_backlog_quota();
                      } else if (r.status().code() == common::ErrorCode::kFenced) {
                        // Another node took the log over: the topic closes here.
                        if (!taken_over_ && context_.log_taken_over) context_.log_taken_over(name_);
                        taken_over_ = true;
                      }
                    }
                    if (!r.is_ok() && r.status().code() == common::ErrorCode::kFenced) {
                      // Also once the topic closed meanwhile: the client is told to look
                      // again (kFenced would be final for a Pulsar producer; a Kafka
                      // client refreshes its metadata for kWrongNode).
                      r = Status::wrong_node("moved to another node (" + r.status().message() + "): look it up again");
                    }
                    if (context_.lease_gate == nullptr || !r.is_ok()) return done(std::move(r));
                    context_.lease_gate->pass([done = std::move(done), r = std::move(r)](bool acknowledged) mutable {
                      if (!acknowledged) return done(Status::unavailable("the broker is shutting down"));
                      done(std::move(r));
                    });
                  });
}

}  // namespace magnetar::broker

namespace magnetar::broker {

void Topic::trace_stored(Position at, int64_t received_ms, uint64_t producer_id, const ledger::MessageHeader& header,
                         const common::Slice& payload) {
  TopicTracing& tracing = cold_->tracing;  // tracing is on
  if (!tracing.traced(at)) return;
  TraceEvent received;
  received.stage = TraceStage::kReceived;
  received.time_ms = received_ms;
  received.position = at;
  received.producer = header.producer;
  received.sequence_id = header.sequence_id;
  if (auto p = producers_.find(producer_id); p != producers_.end()) {
    received.client_address = p->second.client.address;
    received.protocol = p->second.client.protocol;
  }
  received.messages = tracing.describe(payload, header.messages);
  if (received.messages.empty() && !header.key.empty()) received.messages.push_back(TracedMessage{header.key, {}});
  TraceEvent persisted;
  persisted.stage = TraceStage::kPersisted;
  persisted.time_ms = common::wall_clock_ms();
  persisted.position = at;
  persisted.detail = cold_->trace_durability;
  tracing.record(std::move(received));
  tracing.record(std::move(persisted));
}

}  // namespace magnetar::broker
