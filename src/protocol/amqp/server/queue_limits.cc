#include "protocol/amqp/server/queue_limits.h"

#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "broker/backlog_quota.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/stage_timing.h"
#include "protocol/amqp/server/amqp_connection.h"
#include "protocol/amqp/server/amqp_service.h"

namespace magnetar::protocol::amqp {

using common::Result;
using common::Status;

namespace {
// Entries one sweep looks at.
constexpr size_t kSweepEntries = 100;
constexpr size_t kHeadEntries = 8;
// The expiration flag in the first property-flags octet (bit 8 of 16).
constexpr uint8_t kExpirationFlagHigh = 0x01;

FieldValue text(std::string s) { return FieldValue::of_string(std::move(s)); }

// The properties a dead-lettered copy carries: x-death first, its
// expiration moved there.
BasicProperties dead_properties(const BasicProperties& in, const QueueRef& queue, const AmqpMessage& m,
                                std::string_view reason) {
  BasicProperties p = in;
  FieldTable headers = p.headers ? *p.headers : FieldTable{};
  FieldValue death;
  death.type = 'F';
  FieldValue keys;
  keys.type = 'A';
  keys.array.push_back(text(m.routing_key));
  FieldValue time;
  time.type = 'T';
  time.i = common::wall_clock_ms() / 1000;
  death.table = {{"count", FieldValue::of_int(1)}, {"reason", text(std::string(reason))},
                 {"queue", text(queue.name)},     {"time", time},
                 {"exchange", text(m.exchange)},  {"routing-keys", keys}};
  if (p.expiration) {
    death.table.push_back({"original-expiration", text(*p.expiration)});
    p.expiration.reset();
  }
  FieldValue* deaths = nullptr;
  for (auto& h : headers) {
    if (h.name == "x-death" && h.value.type == 'A') deaths = &h.value;
  }
  if (deaths == nullptr) {
    FieldValue list;
    list.type = 'A';
    headers.push_back({"x-death", list});
    deaths = &headers.back().value;
  }
  deaths->array.insert(deaths->array.begin(), std::move(death));
  if (find_field(headers, "x-first-death-reason") == nullptr) {
    headers.push_back({"x-first-death-reason", text(std::string(reason))});
    headers.push_back({"x-first-death-queue", text(queue.name)});
    headers.push_back({"x-first-death-exchange", text(m.exchange)});
  }
  p.headers = std::move(headers);
  return p;
}

}  // namespace

bool expired(const QueueArguments& args, const AmqpMessage& m, int64_t publish_ms, int64_t now_ms) {
  if (args.message_ttl_ms && publish_ms + *args.message_ttl_ms <= now_ms) return true;
  // Decoding the properties only when they carry an expiration.
  if (m.properties.size() < 2 || (m.properties.data()[0] & kExpirationFlagHigh) == 0) return false;
  auto p = decode_properties(m.properties);
  if (!p || !p->expiration) return false;
  char* end = nullptr;
  long long ttl = std::strtoll(p->expiration->c_str(), &end, 10);
  if (end == p->expiration->c_str() || ttl < 0) return false;
  return publish_ms + ttl <= now_ms;
}

void when_consumers_keep_up(broker::Topic* topic, const std::weak_ptr<bool>& alive, std::function<void()> fn) {
  broker::Subscription* sub = alive.expired() ? nullptr : topic->subscription(queue_subscription());
  if (sub == nullptr) return fn();
  sub->when_caught_up(std::move(fn));
}

namespace {

// On `topic`'s home reactor: stores one copy as producer `producer_id`
// (added to the topic on first use). `stored` (may be empty) runs when the
// store answers; `done` with its outcome, once the queue's consumers keep up
// (when_consumers_keep_up) when it was stored.
void store_copy(broker::Topic& topic, uint64_t producer_id, const std::string& producer_name,
                const broker::ClientInfo& client, ledger::MessageHeader header, common::Slice payload,
                std::function<void()> stored, std::function<void(Status)> done,
                std::shared_ptr<broker::PublishStages::Marks> marks = nullptr) {
  if (marks) marks->at_topic_ns = common::monotonic_ns();
  Status added = topic.add_producer(producer_id, producer_name, client);
  if (!added.is_ok() && added.code() != common::ErrorCode::kAlreadyExists) {
    if (stored) stored();
    return done(added);
  }
  topic.publish(producer_id, std::move(header), std::move(payload),
                [stored = std::move(stored), done = std::move(done), topic = &topic, alive = topic.liveness(),
                 marks = std::move(marks)](Result<ledger::Position> p) {
                  if (marks && p.is_ok()) marks->take_add_timing();
                  if (stored) stored();
                  if (!p.is_ok()) return done(p.status());
                  when_consumers_keep_up(topic, alive, [done]() { done(Status::ok()); });
                });
}

}  // namespace

void append_copies(broker::BrokerService& broker, const std::vector<broker::TopicName>& topics,
                   const PublishedEntry& entry, uint64_t producer_id, const std::string& producer_name,
                   const broker::ClientInfo& client, std::function<void(Status)> done,
                   std::shared_ptr<broker::PublishStages::Marks> marks) {
  if (topics.empty()) return done(Status::ok());
  if (topics.size() > 1) marks = nullptr;  // one publish, several stores: not one path to time
  struct State {
    std::atomic<size_t> left;
    std::mutex mu;
    Status failed;  // guarded by mu
  };
  auto state = std::make_shared<State>();
  state->left = topics.size();
  auto one = [state, done](Status st) {
    if (!st.is_ok()) {
      std::lock_guard lock(state->mu);
      if (state->failed.is_ok()) state->failed = st;
    }
    if (state->left.fetch_sub(1) != 1) return;
    Status result;
    {
      std::lock_guard lock(state->mu);
      result = state->failed;
    }
    done(result);
  };
  for (const auto& topic : topics) {
    broker.with_topic(topic, [producer_id, producer_name, client, header = entry.header, payload = entry.entry,
                              one, marks](Result<broker::Topic*> t) mutable {
      if (!t.is_ok()) return one(t.status());
      store_copy(**t, producer_id, producer_name, client, std::move(header), std::move(payload), nullptr, one,
                 std::move(marks));
    });
  }
}

void admit_or_reject(AmqpService& service, broker::Topic& topic, const QueueRef& queue, const PublishedEntry& entry,
                     const AmqpMessage& m, uint64_t producer_id, const std::string& producer_name,
                     const broker::ClientInfo& client, std::function<void(Status, bool)> done) {
  // Messages and bytes admitted to each queue of this (home) reactor and
  // not stored yet: they count toward the length of the next admission.
  struct InFlight {
    uint64_t messages = 0;
    uint64_t bytes = 0;
  };
  static thread_local std::unordered_map<std::string, InFlight> in_flight;
  const std::string key = topic.name().to_string();
  broker::Subscription* sub = topic.subscription(queue_subscription());
  const ledger::LedgerChain& chain = topic.log().chain();
  const uint64_t size = entry.entry.size();
  InFlight& pending = in_flight[key];
  const uint64_t ready = (sub != nullptr ? sub->cursor().backlog_messages(chain) : 0) + pending.messages;
  const uint64_t bytes =
      (sub != nullptr ? broker::backlog_bytes_after(chain, sub->cursor().mark_delete_position()) : 0) + pending.bytes;
  const bool full = (queue.args.max_length && ready >= static_cast<uint64_t>(*queue.args.max_length)) ||
                    (queue.args.max_length_bytes && bytes + size > static_cast<uint64_t>(*queue.args.max_length_bytes));
  if (full) {
    if (pending.messages == 0) in_flight.erase(key);
    AmqpMetrics::get().overflow_rejected.inc();
    if (queue.args.overflow != Overflow::kRejectPublishDlx) return done(Status::ok(), true);
    return dead_letter(service, queue, m, "maxlen", [done](Status) { done(Status::ok(), true); });
  }
  pending.messages += 1;
  pending.bytes += size;
  // Once stored it counts in the queue's backlog instead.
  auto stored = [key, size]() {
    auto it = in_flight.find(key);
    if (it == in_flight.end()) return;
    it->second.messages -= 1;
    it->second.bytes -= size;
    if (it->second.messages == 0) in_flight.erase(it);
  };
  store_copy(topic, producer_id, producer_name, client, entry.header, entry.entry, std::move(stored),
             [done](Status st) { done(st, false); });
}

void dead_letter(AmqpService& service, const QueueRef& queue, const AmqpMessage& m, std::string_view reason,
                 std::function<void(Status)> done) {
  if (!queue.args.dead_letter_exchange) return done(Status::ok());
  AmqpMetrics::get().dead_lettered.inc();
  const std::string& exchange = *queue.args.dead_letter_exchange;
  const std::string routing_key = queue.args.dead_letter_routing_key.value_or(m.routing_key);
  auto props = decode_properties(m.properties);
  ContentHeader header;
  header.properties = dead_properties(props ? *props : BasicProperties{}, queue, m, reason);
  WireWriter w(128);
  encode_properties(w, header.properties);
  header.raw_properties = w.finish();
  header.body_size = m.body.size();
  std::vector<broker::TopicName> topics;
  service.read(queue.vhost, [&](const Topology& t) {
    // A dead-letter exchange that does not exist drops the message, as
    // RabbitMQ does.
    if (t.exchange(exchange) == nullptr) return;
    auto queues = t.route(exchange, routing_key, &*header.properties.headers);
    topics = AmqpService::routed_topics(t, queue.vhost, queues, header.properties.priority);
  });
  PublishedEntry entry = message_to_entry(exchange, routing_key, header, m.body.view(), common::wall_clock_ms(),
                                          service.dead_letter_producer(), service.next_sequence());
  static const broker::ClientInfo kDeadLetters{"amqp", "", "dead-lettering", 0};
  append_copies(service.broker(), topics, entry, service.dead_letter_producer_id(), service.dead_letter_producer(),
                kDeadLetters,
                [queue = queue.name, exchange, reason = std::string(reason), done = std::move(done)](Status st) {
                  if (!st.is_ok()) {
                    MLOG_WARN("amqp: a message {} from queue '{}' was not dead-lettered to exchange '{}': {}", reason,
                              queue, exchange, st.to_string());
                    AmqpMetrics::get().dead_letter_failures.inc();
                  }
                  done(st);
                });
}

void sweep(AmqpService& service, broker::Topic& topic, QueueRef queue, std::function<void()> done) {
  // One sweep per topic at a time; the set belongs to this (home) reactor.
  static thread_local std::set<std::string> sweeping;
  broker::Subscription* sub = topic.subscription(queue_subscription());
  const std::string key = topic.name().to_string();
  if (sub == nullptr || sub->consumer_count() > 0 || sweeping.count(key)) return done();
  const uint64_t ready = sub->cursor().backlog_messages(topic.log().chain());
  if (ready == 0) return done();
  sweeping.insert(key);
  auto alive = topic.liveness();
  // Without a queue TTL or length only messages' own expirations apply,
  // at the head: a few entries are enough.
  const size_t entries = queue.args.message_ttl_ms || queue.args.bounded() ? kSweepEntries : kHeadEntries;
  topic.log().read_entries(
      sub->cursor().mark_delete_position(), entries,
      [&service, &topic, queue, ready, alive, key, done](Result<std::vector<ledger::LedgerEntry>> read) {
        auto finish = [key, done]() {
          sweeping.erase(key);
          done();
        };
        if (alive.expired() || !read.is_ok()) return finish();
        broker::Subscription* sub = topic.subscription(queue_subscription());
        if (sub == nullptr) return finish();
        const int64_t now = common::wall_clock_ms();
        // Over the length: dropped at the head (x-overflow drop-head only;
        // the other modes refuse publishes instead).
        const bool drop_head = queue.args.overflow == Overflow::kDropHead;
        uint64_t over = drop_head && queue.args.max_length && ready > static_cast<uint64_t>(*queue.args.max_length)
                            ? ready - static_cast<uint64_t>(*queue.args.max_length)
                            : 0;
        uint64_t over_bytes = 0;
        if (drop_head && queue.args.max_length_bytes) {
          const uint64_t bytes = broker::backlog_bytes_after(topic.log().chain(), sub->cursor().mark_delete_position());
          const auto limit = static_cast<uint64_t>(*queue.args.max_length_bytes);
          over_bytes = bytes > limit ? bytes - limit : 0;
        }
        struct Dropped {
          ledger::Position position;
          std::vector<AmqpMessage> messages;
          const char* reason;
        };
        std::vector<Dropped> dropped;
        for (auto& e : *read) {
          if (sub->cursor().is_acknowledged(e.position)) continue;
          std::vector<AmqpMessage> messages;
          if (!entry_to_messages(e.payload, &messages).is_ok() || messages.empty()) break;
          const char* reason = nullptr;
          if (over > 0 || over_bytes > 0) {
            reason = "maxlen";
            over = over > messages.size() ? over - messages.size() : 0;
            over_bytes = over_bytes > e.payload.size() ? over_bytes - e.payload.size() : 0;
          } else if (expired(queue.args, messages.front(), e.header.publish_time_ms, now)) {
            reason = "expired";
          } else {
            break;  // the head is live: expiry goes no further, as in RabbitMQ
          }
          dropped.push_back({e.position, std::move(messages), reason});
        }
        if (dropped.empty()) return finish();
        // Acknowledged once every dead-lettered copy is stored.
        size_t copies = 0;
        for (const auto& d : dropped) copies += d.messages.size();
        auto left = std::make_shared<std::atomic<size_t>>(copies);
        auto positions = std::make_shared<std::vector<ledger::Position>>();
        for (const auto& d : dropped) positions->push_back(d.position);
        runtime::Reactor* home = runtime::Reactor::current();
        auto all_stored = [&topic, alive, positions, finish]() {
          if (alive.expired()) return finish();
          for (const auto& p : *positions) (void)topic.log().ack(queue_subscription(), p);
          if (auto* s = topic.subscription(queue_subscription())) s->rewind();
          finish();
        };
        for (const auto& d : dropped) {
          for (const auto& m : d.messages) {
            dead_letter(service, queue, m, d.reason, [left, home, all_stored](Status) {
              if (left->fetch_sub(1) != 1) return;
              if (home->is_on_thread()) return all_stored();
              if (!home->post_reliably(all_stored)) MLOG_DEBUG("amqp: a sweep ended while its reactor stopped");
            });
          }
        }
      });
}

void QueueKeeper::changed() {
  runtime::Reactor& r0 = runtime_.reactor(0);
  auto consider = [this]() {
    if (stopped_) return;
    bool wanted = service_.has_limited_queues();
    if (wanted && !timer_) {
      timer_ = std::make_unique<runtime::Timer>(runtime_.reactor(0));
      timer_->every(kSweepInterval, [this]() { tick(); });
    } else if (!wanted && timer_) {
      timer_->cancel();
    } else if (wanted && !timer_->active()) {
      timer_->every(kSweepInterval, [this]() { tick(); });
    }
  };
  if (r0.is_on_thread()) return consider();
  if (!r0.post_reliably(consider)) MLOG_DEBUG("amqp: the queue keeper's reactor is stopping");
}

void QueueKeeper::stop() {
  runtime_.reactor(0).run_sync([this]() {
    stopped_ = true;
    timer_.reset();
  });
}

void QueueKeeper::tick() {
  const int64_t now = common::wall_clock_ms();
  for (auto& q : service_.limited_queues()) {
    auto topic = AmqpService::queue_topic(q.ref.vhost, q.ref.name);
    if (!topic) continue;
    const bool may_expire = q.ref.args.expires_ms && now - q.last_used_ms >= *q.ref.args.expires_ms;
    service_.broker().with_topic(*topic, [this, q, may_expire](Result<broker::Topic*> t) {
      if (!t.is_ok()) return;
      broker::Subscription* sub = (*t)->subscription(queue_subscription());
      if (may_expire && (sub == nullptr || sub->consumer_count() == 0)) {
        delete_queues(service_, q.ref.vhost, {q.ref.name}, q.last_used_ms);
        return;
      }
      sweep(service_, **t, q.ref, []() {});
    });
  }
}

}  // namespace magnetar::protocol::amqp
