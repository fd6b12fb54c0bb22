// basic.qos, basic.consume, basic.cancel, basic.get, and deliveries.
//
// A consumer is a broker consumer on the queue's Shared subscription "amqp"
// (Failover with x-single-active-consumer: the first consumer attached gets
// every message until it is cancelled or goes, then the next, as RabbitMQ's
// single active consumer).
// Flow control maps onto the broker's permits: with a prefetch count (and
// manual acks) the consumer starts with that many permits and gets one back
// per message acknowledged, rejected or nacked; without one (or with
// no-ack) permits are given back as messages are written to the client,
// and held while the connection is not writable.
//
// basic.get uses a puller per (channel, queue): a broker consumer with no
// permits that gets one per get. When the queue has no ready message the
// answer is get-empty; a message that reaches a puller with no get waiting
// goes back to the queue.
#include <cstdint>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/logging.h"
#include "protocol/amqp/convert.h"
#include "ledger/managed_ledger.h"
#include "protocol/amqp/server/amqp_connection.h"
#include "protocol/amqp/server/forwarding.h"

namespace magnetar::protocol::amqp {

using common::Result;
using common::Status;

namespace {
// Permits a consumer without a prefetch limit holds at a time.
constexpr uint32_t kUnlimitedWindow = 1000;
// How long basic.get waits for a message it saw ready (another consumer
// may take it first).
constexpr std::chrono::milliseconds kGetWait{500};

void answer_empty(AmqpConnection& c, Channel& ch);

// A stream's delivery names its offset in header x-stream-offset, as
// RabbitMQ's do; properties that do not decode go as they are.
common::Slice with_stream_offset(const common::Slice& raw, int64_t offset) {
  auto props = decode_properties(raw);
  if (!props) return raw;
  if (!props->headers) props->headers.emplace();
  props->headers->push_back({"x-stream-offset", FieldValue::of_int(offset)});
  WireWriter out(raw.size() + 32);
  encode_properties(out, *props);
  return out.finish();
}

// Attaches `consumer` to its queue's subscription; `then` runs on the
// connection with the outcome, before any delivery; the first permits are
// given after it.
void attach(AmqpConnection& c, Channel& ch, const std::shared_ptr<QueueConsumer>& consumer, uint32_t permits,
            std::function<void(AmqpConnection&, Channel&, Status)> then) {
  broker::ConsumerOptions options;
  options.subscription = consumer->subscription;
  options.type = consumer->single_active ? broker::SubscriptionType::kFailover : broker::SubscriptionType::kShared;
  // A puller of a single-active-consumer queue never takes the place of a
  // consumer: it is active only while no consumer is attached.
  if (consumer->single_active && consumer->tag.empty()) options.priority = INT32_MAX;
  options.consumer_name = consumer->tag.empty() ? "basic.get" : consumer->tag;
  options.initial_position = broker::InitialPosition::kLatest;
  options.client = c.client_info();
  if (consumer->stream) {
    options.type = broker::SubscriptionType::kExclusive;
    options.durable = false;
  }
  c.service().broker().with_topic(
      consumer->topic, [&service = c.service(), reply = c.replier(ch), consumer, permits, options = std::move(options),
                        then](Result<broker::Topic*> t) mutable {
        if (!t.is_ok()) {
          // A consumer, puller or stream reader of a queue another member
          // owns reads it there.
          RemoteConsumers* remote = service.remote_consumers();
          broker::Ownership* ownership = service.broker().ownership();
          auto owner = ownership != nullptr ? ownership->known_owner(consumer->topic) : std::nullopt;
          if (t.status().code() == common::ErrorCode::kWrongNode && remote != nullptr && owner && !owner->here) {
            std::optional<StreamStart> stream;
            if (consumer->stream) stream = consumer->start;
            return remote->open(
                owner->node, consumer->topic, options, consumer->sink, stream,
                [reply, consumer, permits, then](Result<std::shared_ptr<RemoteSession>> session) {
                  reply([consumer, permits, then, session](AmqpConnection& conn, Channel& chan) {
                    if (!session.is_ok()) return then(conn, chan, session.status());
                    consumer->remote = *session;
                    consumer->skip_below = (*session)->skip_below();
                    then(conn, chan, Status::ok());
                    if (permits > 0 && !consumer->cancelled) consumer->remote->flow(permits);
                  });
                });
          }
          Status st = consume_here_refused(service, consumer->topic, t.status());
          return reply([then, st](AmqpConnection& conn, Channel& chan) { then(conn, chan, st); });
        }
        broker::Topic* topic = *t;
        auto subscribe = [topic, reply, consumer, permits, options = std::move(options), then](
                             std::optional<ledger::Position> start_after, broker::InitialPosition initial,
                             int64_t skip_below) mutable {
          // Read by the connection's reactor only after the subscription
          // delivers, which it posts there.
          consumer->skip_below = skip_below;
          options.start_after = start_after;
          options.initial_position = initial;
          topic->subscribe(consumer->broker_id, std::move(options), consumer->sink.get(),
                           [reply, consumer, permits, then](Result<broker::Subscription*> s) {
                             Status st = s.is_ok() ? Status::ok() : s.status();
                             reply([then, st](AmqpConnection& conn, Channel& chan) { then(conn, chan, st); });
                             if (s.is_ok() && permits > 0) (*s)->flow(consumer->broker_id, permits);
                           });
        };
        if (!consumer->stream) return subscribe(std::nullopt, broker::InitialPosition::kLatest, 0);
        stream_start(*topic, consumer->start, std::move(subscribe));
      });
}

// A priority queue's consumer (or puller) gets a consumer per level, made
// like `first` (level 0) on the level's topic.
void make_levels(AmqpConnection& c, Channel& ch, const std::shared_ptr<QueueConsumer>& first, const QueueDef& q) {
  if (q.parsed.max_priority == 0) return;
  auto group = std::make_shared<PriorityGroup>();
  group->prefetch = first->prefetch;
  group->waiting.resize(q.parsed.max_priority + 1u);
  first->group = group;
  group->levels.push_back(first);
  for (unsigned level = 1; level <= q.parsed.max_priority; ++level) {
    auto lc = std::make_shared<QueueConsumer>(*first);
    lc->level = static_cast<uint8_t>(level);
    lc->topic = *AmqpService::queue_topic(c.vhost(), q.name, lc->level);
    lc->broker_id = c.service().next_id();
    lc->sink = std::make_shared<AmqpConsumerSink>(c.link(), c.reactor(), ch.id, ch.serial);
    lc->sink->attach(lc);
    group->levels.push_back(std::move(lc));
  }
}

// attach() for every level of `consumer` (itself alone for a plain queue):
// `then` runs once all have answered, with the first failure.
void attach_levels(AmqpConnection& c, Channel& ch, const std::shared_ptr<QueueConsumer>& consumer, uint32_t permits,
                   std::function<void(AmqpConnection&, Channel&, Status)> then) {
  if (!consumer->group) return attach(c, ch, consumer, permits, std::move(then));
  struct Join {
    size_t left = 0;
    Status failed;
  };
  auto join = std::make_shared<Join>();
  const auto levels = consumer->group->levels;
  join->left = levels.size();
  for (const auto& level : levels) {
    // Answers come back on this connection's reactor, one at a time.
    attach(c, ch, level, permits, [join, then](AmqpConnection& conn, Channel& chan, Status st) {
      if (!st.is_ok() && join->failed.is_ok()) join->failed = st;
      if (--join->left == 0) then(conn, chan, join->failed);
    });
  }
}

// The queue's limits for its consumers, or null when it has none.
std::shared_ptr<const QueueRef> limits_of(const AmqpConnection& c, const QueueDef& q) {
  QueueRef ref{c.vhost(), q.name, q.parsed, q.auto_delete};
  if (!ref.limited() && !ref.auto_delete) return nullptr;
  return std::make_shared<const QueueRef>(std::move(ref));
}

// Counts a consumer on its queue, refusing (403) a second one beside an
// exclusive consumer and an exclusive one beside others.
bool count_consumer(AmqpConnection& c, Channel& ch, const Method& m, const QueueConsumer& consumer, bool exclusive) {
  bool refused = false;
  c.service().write(c.vhost(), [&](Topology& t, AmqpService::Persist&) {
    QueueDef* q = t.mutable_queue(consumer.queue);
    if (q == nullptr) return;
    if (q->exclusive_consumer != 0 || (exclusive && q->consumers > 0)) {
      refused = true;
      return;
    }
    ++q->consumers;
    if (exclusive) q->exclusive_consumer = consumer.broker_id;
    q->last_used_ms = common::wall_clock_ms();
  });
  if (refused) {
    c.channel_error(ch, {kAccessRefused, fmt::format("queue '{}' in vhost '{}' in exclusive use", consumer.queue,
                                                     c.vhost_name()), m.key()});
  }
  return !refused;
}

void consume(AmqpConnection& c, Channel& ch, const Method& m) {
  QueueDef q;
  if (!find_queue(c, ch, m.str("queue"), m.key(), &q)) return;
  std::string tag = m.str("consumer-tag");
  if (tag.empty()) tag = fmt::format("amq.ctag-{}-{}", c.id(), c.service().next_id());
  if (ch.consumers.count(tag)) {
    return c.connection_error({kNotAllowed, fmt::format("attempt to reuse consumer tag '{}'", tag), m.key()});
  }
  auto consumer = std::make_shared<QueueConsumer>();
  consumer->tag = tag;
  consumer->queue = q.name;
  consumer->topic = *AmqpService::queue_topic(c.vhost(), q.name);
  if (!c.authorized(ch, consumer->topic, broker::TopicAction::kConsume, m.key())) return;
  consumer->broker_id = c.service().next_id();
  if (q.parsed.stream) {
    // RabbitMQ's rules for stream consumers: acknowledgements are their
    // credit, so they need a prefetch of their own.
    const std::string where = fmt::format("stream queue '{}' in vhost '{}'", q.name, c.vhost_name());
    if (m.flag("no-ack")) {
      return c.channel_error(ch, {kPreconditionFailed, "automatic acknowledgement not supported by " + where, m.key()});
    }
    if (ch.global_prefetch > 0) {
      return c.channel_error(ch, {kPreconditionFailed, "global qos not supported by " + where, m.key()});
    }
    if (ch.prefetch == 0) {
      return c.channel_error(ch, {kPreconditionFailed, "consumer prefetch count is not set for " + where, m.key()});
    }
    auto start = parse_stream_offset(find_field(m.table("arguments"), "x-stream-offset"), common::wall_clock_ms());
    if (!start) return c.channel_error(ch, {kPreconditionFailed, start.status().message(), m.key()});
    consumer->stream = true;
    consumer->start = *start;
    consumer->subscription = fmt::format("amqp-stream-{}", consumer->broker_id);
  }
  consumer->no_ack = m.flag("no-ack");
  // Under a channel-wide limit a consumer without one of its own takes at
  // most that many at a time, so one channel does not draw a queue's
  // messages away from other consumers into its wait (release_gated).
  const uint16_t own = ch.prefetch > 0 && ch.global_prefetch > 0 ? std::min(ch.prefetch, ch.global_prefetch)
                                                                 : std::max(ch.prefetch, ch.global_prefetch);
  consumer->prefetch = consumer->no_ack ? 0 : own;
  consumer->window_from_global = !consumer->no_ack && ch.prefetch == 0 && ch.global_prefetch > 0;
  consumer->sink = std::make_shared<AmqpConsumerSink>(c.link(), c.reactor(), ch.id, ch.serial);
  consumer->sink->attach(consumer);
  consumer->limits = limits_of(c, q);
  consumer->single_active = q.parsed.single_active_consumer;
  if (!count_consumer(c, ch, m, *consumer, m.flag("exclusive"))) return;
  make_levels(c, ch, consumer, q);
  ch.consumers[tag] = consumer;
  const uint32_t permits = consumer->prefetch > 0 ? consumer->prefetch : kUnlimitedWindow;
  attach_levels(c, ch, consumer, permits, [m, consumer](AmqpConnection& conn, Channel& chan, Status st) {
    if (!st.is_ok()) {
      chan.consumers.erase(consumer->tag);
      if (consumer->group) {
        conn.detach(consumer);  // the levels that did attach
      } else {
        conn.uncount(*consumer);
        consumer->cancelled = true;
      }
      return conn.channel_error(chan, {reply_code(st), st.message(), m.key()});
    }
    conn.answer(chan, m, Method::of(m::kBasicConsumeOk).set("consumer-tag", consumer->tag));
  });
}

void cancel(AmqpConnection& c, Channel& ch, const Method& m) {
  const std::string& tag = m.str("consumer-tag");
  auto it = ch.consumers.find(tag);
  if (it != ch.consumers.end()) {
    c.detach(it->second);
    ch.consumers.erase(it);
  }
  c.answer(ch, m, Method::of(m::kBasicCancelOk).set("consumer-tag", tag));
}

void answer_empty(AmqpConnection& c, Channel& ch) {
  ch.gets.clear();
  if (ch.get_timer) ch.get_timer->cancel();
  c.send_method(ch.id, Method::of(m::kBasicGetEmpty));
}

// basic.get: asks level `level` of puller `p` (its only one for a plain
// queue) for one message if it has one ready, else the level below; at the
// bottom, answers get-empty. The get's message-count is what that level
// has ready after the message (a priority queue's lower levels are not
// counted).
void pull_level(AmqpConnection& c, Channel& ch, const std::shared_ptr<QueueConsumer>& p, uint8_t level) {
  const auto& at = p->group ? p->group->levels.at(level) : p;
  if (at->remote) {
    // The level's topic is another member's: its counts come from there,
    // and the permit goes there once the count is in place.
    return on_topic_owner(c.service(), at->topic, {TopicCall::Op::kCounts},
                          [reply = c.replier(ch), p, level, at](Result<QueueCounts> r) {
                            const uint64_t ready = r.is_ok() ? r->messages : 0;
                            reply([p, level, at, ready](AmqpConnection& c2, Channel& ch2) {
                              if (ready == 0) {
                                if (level == 0 || !p->group || p->group->levels.empty()) return answer_empty(c2, ch2);
                                return pull_level(c2, ch2, p, static_cast<uint8_t>(level - 1));
                              }
                              if (!ch2.gets.empty()) ch2.gets.front().message_count = ready - 1;
                              if (at->remote) at->remote->flow(1);
                            });
                          });
  }
  on_subscription(c.service(), at, [reply = c.replier(ch), p, level](broker::Subscription& s, uint64_t id) {
    auto stats = s.stats();
    const uint64_t ready =
        stats.backlog_messages > stats.unacked_messages ? stats.backlog_messages - stats.unacked_messages : 0;
    if (ready == 0) {
      return reply([p, level](AmqpConnection& c2, Channel& ch2) {
        if (level == 0 || !p->group || p->group->levels.empty()) return answer_empty(c2, ch2);
        pull_level(c2, ch2, p, static_cast<uint8_t>(level - 1));
      });
    }
    // Reaches the channel before the delivery the permit brings.
    reply([ready](AmqpConnection&, Channel& ch2) {
      if (!ch2.gets.empty()) ch2.gets.front().message_count = ready - 1;
    });
    s.flow(id, 1);
  });
}

void get(AmqpConnection& c, Channel& ch, const Method& m) {
  QueueDef q;
  if (!find_queue(c, ch, m.str("queue"), m.key(), &q)) return;
  if (!c.authorized(ch, *AmqpService::queue_topic(c.vhost(), q.name), broker::TopicAction::kConsume, m.key())) return;
  if (q.parsed.stream) {
    // RabbitMQ's answer: a connection exception.
    return c.connection_error({kNotImplemented, fmt::format("basic.get not supported by stream queue '{}' in vhost "
                                                            "'{}'; use basic.consume with x-stream-offset",
                                                            q.name, c.vhost_name()), m.key()});
  }
  c.service().touch(c.vhost(), q.name);
  if (!ch.gets.empty()) {
    return c.connection_error({kCommandInvalid, "basic.get while another basic.get waits for its answer", m.key()});
  }
  ch.gets.push_back({q.name, m.flag("no-ack")});
  if (!ch.get_timer) ch.get_timer = std::make_unique<runtime::Timer>(c.reactor());
  ch.get_timer->once(kGetWait, [&c, id = ch.id, serial = ch.serial]() {
    Channel* chan = c.channel(id, serial);
    if (chan != nullptr && !chan->gets.empty()) answer_empty(c, *chan);
  });
  auto& puller = ch.pullers[q.name];
  auto pull = [](AmqpConnection& conn, Channel& chan, const std::shared_ptr<QueueConsumer>& p) {
    const size_t levels = p->group ? p->group->levels.size() : 1;
    pull_level(conn, chan, p, static_cast<uint8_t>(levels - 1));
  };
  if (puller) return pull(c, ch, puller);
  puller = std::make_shared<QueueConsumer>();
  puller->queue = q.name;
  puller->topic = *AmqpService::queue_topic(c.vhost(), q.name);
  puller->broker_id = c.service().next_id();
  puller->sink = std::make_shared<AmqpConsumerSink>(c.link(), c.reactor(), ch.id, ch.serial);
  puller->sink->attach(puller);
  puller->limits = limits_of(c, q);
  puller->single_active = q.parsed.single_active_consumer;
  make_levels(c, ch, puller, q);
  attach_levels(c, ch, puller, 0, [m, puller, pull](AmqpConnection& conn, Channel& chan, Status st) {
    if (!st.is_ok()) {
      chan.pullers.erase(puller->queue);
      chan.gets.clear();
      return conn.channel_error(chan, {reply_code(st), st.message(), m.key()});
    }
    pull(conn, chan, puller);
  });
}

// A new channel-wide limit. Consumers whose window came from the old one
// get the new one: more permits when it grows, the unlimited window when it
// is lifted (their permits then refill as messages go out).
void set_global_prefetch(AmqpConnection& c, Channel& ch, uint16_t limit) {
  const uint16_t before = ch.global_prefetch;
  ch.global_prefetch = limit;
  auto widen = [&](const std::shared_ptr<QueueConsumer>& consumer) {
    if (!consumer->window_from_global || consumer->cancelled) return;
    if (limit == 0) {
      consumer->window_from_global = false;
      consumer->prefetch = 0;
      c.grant(consumer, kUnlimitedWindow);
    } else {
      if (limit > before) c.grant(consumer, limit - before);
      consumer->prefetch = limit;
    }
  };
  for (auto& [tag, consumer] : ch.consumers) {
    if (!consumer->group) {
      widen(consumer);
      continue;
    }
    if (consumer->window_from_global) consumer->group->prefetch = limit;
    for (const auto& level : consumer->group->levels) widen(level);
  }
  c.release_gated(ch);
}

}  // namespace

// On the stream's topic home: where x-stream-offset `start` puts a new
// reader. An offset or time past the end is the next message; before the
// first one kept, the first.
void stream_start(broker::Topic& topic, const StreamStart& start, StartAt then) {
  using Kind = StreamStart::Kind;
  if (start.kind == Kind::kFirst) return then(std::nullopt, broker::InitialPosition::kEarliest, 0);
  if (start.kind == Kind::kNext) return then(std::nullopt, broker::InitialPosition::kLatest, 0);
  if (start.kind == Kind::kLast) {
    const ledger::Position last = topic.log().last_confirmed();
    if (last.entry == storage::kNoEntry) return then(std::nullopt, broker::InitialPosition::kLatest, 0);
    return then(ledger::Position{last.ledger, last.entry - 1}, broker::InitialPosition::kLatest, 0);
  }
  auto* ml = dynamic_cast<ledger::ManagedLedger*>(&topic.log());
  if (ml == nullptr) return then(std::nullopt, broker::InitialPosition::kLatest, 0);
  const int64_t skip_below = start.kind == Kind::kOffset ? start.value : 0;
  auto found = [alive = topic.liveness(), then, skip_below](Result<ledger::Position> first) {
    if (alive.expired()) return;
    if (!first.is_ok()) return then(std::nullopt, broker::InitialPosition::kLatest, 0);
    then(ledger::Position{first->ledger, first->entry - 1}, broker::InitialPosition::kLatest, skip_below);
  };
  if (start.kind == Kind::kOffset) return ml->seek_by_index(start.value, found);
  ml->seek_by_time(start.value, found);
}

void on_subscription(AmqpService& service, const std::shared_ptr<QueueConsumer>& consumer,
                     std::function<void(broker::Subscription&, uint64_t)> fn) {
  service.broker().with_existing_topic(consumer->topic, false,
                                       [consumer, fn = std::move(fn)](Result<broker::Topic*> t) {
                                         if (!t.is_ok()) return;
                                         if (auto* s = (*t)->subscription(consumer->subscription)) {
                                           fn(*s, consumer->broker_id);
                                         }
                                       });
}

namespace {
// A consumer's subscription on this member.
class LocalOps final : public SubscriptionOps {
 public:
  LocalOps(broker::Subscription& s, uint64_t id) : s_(s), id_(id) {}
  void flow(uint32_t permits) override { s_.flow(id_, permits); }
  void ack(ledger::Position p) override { (void)s_.ack(id_, p); }
  void ack_batch_index(ledger::Position p, uint32_t index, uint32_t size) override {
    (void)s_.ack_batch_index(id_, p, index, size);
  }
  void redeliver(const std::vector<ledger::Position>& positions) override {
    s_.redeliver_unacknowledged(id_, positions);
  }

 private:
  broker::Subscription& s_;
  const uint64_t id_;
};
}  // namespace

void on_subscription_ops(AmqpService& service, const std::shared_ptr<QueueConsumer>& consumer,
                         std::function<void(SubscriptionOps&)> fn) {
  if (consumer->remote) return fn(*consumer->remote);
  on_subscription(service, consumer, [fn = std::move(fn)](broker::Subscription& s, uint64_t id) {
    LocalOps ops(s, id);
    fn(ops);
  });
}

void AmqpConsumerSink::deliver(std::vector<broker::Delivery> entries) {
  runtime::Replier<AmqpConnection>(link_, conn_reactor_)(
      [channel = channel_, serial = serial_, consumer = consumer_, entries = std::move(entries)](
          AmqpConnection& c) mutable {
        if (auto qc = consumer.lock()) c.deliver(channel, serial, qc, std::move(entries));
      });
}

void AmqpConsumerSink::closed(const Status&) {
  runtime::Replier<AmqpConnection>(link_, conn_reactor_)(
      [channel = channel_, serial = serial_, consumer = consumer_](AmqpConnection& c) {
        if (auto qc = consumer.lock()) c.consumer_closed(channel, serial, qc);
      });
}

void AmqpConnection::deliver(uint16_t channel_id, uint64_t serial, const std::shared_ptr<QueueConsumer>& consumer,
                             std::vector<broker::Delivery> entries) {
  Channel* ch = channel(channel_id, serial);
  if (ch == nullptr || consumer->cancelled) return;  // detached already: the broker takes them back
  const bool puller = consumer->tag.empty();
  if (!ch->flow_active && !puller) {
    ch->held.emplace_back(consumer, std::move(entries));
    return;
  }
  if (consumer->group && !puller) {
    PriorityGroup& group = *consumer->group;
    if (group.levels.empty()) return;  // detached meanwhile
    for (auto& d : entries) group.waiting[consumer->level].push_back(std::move(d));
    return pump(*ch, group);
  }
  if (ch->global_prefetch > 0 && !puller && !consumer->no_ack) {
    ch->gated.emplace_back(consumer, std::move(entries));
    return release_gated(*ch);
  }
  deliver_entries(*ch, consumer, std::move(entries));
}

void AmqpConnection::pump(Channel& ch, PriorityGroup& group) {
  while (!group.levels.empty() && ch.flow_active) {
    if (group.prefetch > 0 && group.in_client >= group.prefetch) return;
    size_t level = group.waiting.size();
    while (level > 0 && group.waiting[level - 1].empty()) --level;
    if (level == 0) return;
    std::shared_ptr<QueueConsumer> from = group.levels[--level];
    if (!from->no_ack && ch.global_prefetch > 0 && ch.unacked.size() >= ch.global_prefetch) return;
    std::vector<broker::Delivery> one;
    one.push_back(std::move(group.waiting[level].front()));
    group.waiting[level].pop_front();
    const size_t before = ch.unacked.size();
    deliver_entries(ch, from, std::move(one));
    group.in_client += static_cast<uint32_t>(ch.unacked.size() - before);
  }
}

void AmqpConnection::release_gated(Channel& ch) {
  while (!ch.gated.empty() && (ch.global_prefetch == 0 || ch.unacked.size() < ch.global_prefetch)) {
    auto& [consumer, entries] = ch.gated.front();
    if (consumer->cancelled) {
      ch.gated.pop_front();
      continue;
    }
    // As many entries as the channel has room for (the last may overshoot
    // it by the rest of its batch, as a consumer's permits may).
    const uint64_t room = ch.global_prefetch == 0 ? UINT64_MAX : ch.global_prefetch - ch.unacked.size();
    uint64_t messages = 0;
    size_t n = 0;
    while (n < entries.size() && messages < room) messages += entries[n++].header.messages;
    std::vector<broker::Delivery> now(std::make_move_iterator(entries.begin()),
                                      std::make_move_iterator(entries.begin() + static_cast<std::ptrdiff_t>(n)));
    std::shared_ptr<QueueConsumer> to = consumer;
    if (n == entries.size()) {
      ch.gated.pop_front();
    } else {
      entries.erase(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(n));
    }
    deliver_entries(ch, to, std::move(now));
  }
  for (auto& [tag, consumer] : ch.consumers) {
    if (consumer->group) pump(ch, *consumer->group);
  }
}

void AmqpConnection::deliver_entries(Channel& chan, const std::shared_ptr<QueueConsumer>& consumer,
                                     std::vector<broker::Delivery> entries) {
  Channel* ch = &chan;
  const bool puller = consumer->tag.empty();
  const QueueRef* limits = consumer->limits.get();
  const bool dead_letters = limits != nullptr && limits->args.dead_letter_exchange.has_value();
  const int64_t now = common::wall_clock_ms();
  uint32_t delivered = 0;
  uint32_t expired_messages = 0;
  uint32_t chunks = 0;  // entries holding a chunk of a chunked Pulsar message: settled, never delivered raw
  std::vector<ledger::Position> settled;   // acknowledged at once (no-ack, expired)
  std::vector<ledger::Position> returned;  // back to the queue (a puller nobody waits on)
  std::vector<AmqpMessage> dead;           // expired: dead-lettered before they are settled
  std::vector<Unacked> passed_over;        // a stream's messages before its x-stream-offset
  for (auto& d : entries) {
    std::vector<AmqpMessage> messages;
    Status st = entry_to_messages(d.payload, &messages);
    if (!st.is_ok()) {
      // A chunk is counted as one (chunks_skipped), anything else as an
      // entry no message can be made of (undeliverable).
      // A chunked message warns once, at its last chunk.
      const bool chunk = st.code() == common::ErrorCode::kUnimplemented;
      if (chunk) {
        ++chunks;
      } else {
        AmqpMetrics::get().undeliverable.inc();
      }
      if (!chunk || !d.header.more_chunks) {
        MLOG_WARN("amqp: entry {}:{} of {} cannot be delivered and is skipped: {}", d.position.ledger,
                  d.position.entry, consumer->topic.to_string(), st.message());
      }
      settled.push_back(d.position);
      continue;
    }
    const auto batch_size = static_cast<uint32_t>(messages.size());
    // An expired message is not delivered: the whole entry is settled
    // (dead-lettered first when the queue says so).
    if (!messages.empty() && !consumer->stream &&
        expired(limits != nullptr ? limits->args : QueueArguments{}, messages.front(), d.header.publish_time_ms, now)) {
      expired_messages += batch_size;
      if (dead_letters) {
        for (auto& msg : messages) dead.push_back(std::move(msg));
      }
      settled.push_back(d.position);
      continue;
    }
    bool no_ack = consumer->no_ack;
    uint64_t message_count = 0;
    for (uint32_t index = 0; index < batch_size; ++index) {
      const AmqpMessage& msg = messages[index];
      const int64_t offset = d.header.first_index + index;
      if (consumer->stream && offset < consumer->skip_below) {
        passed_over.push_back(Unacked{consumer, d.position, index, batch_size, nullptr});
        continue;
      }
      if (puller) {
        if (ch->gets.empty() || ch->gets.front().queue != consumer->queue) {
          returned.push_back(d.position);
          break;
        }
        no_ack = ch->gets.front().no_ack;
        message_count = ch->gets.front().message_count;
        ch->gets.pop_front();
        if (ch->get_timer) ch->get_timer->cancel();
      }
      const uint64_t tag = ch->next_delivery_tag++;
      Method m = Method::of(puller ? m::kBasicGetOk : m::kBasicDeliver);
      if (!puller) m.set("consumer-tag", consumer->tag);
      m.set("delivery-tag", tag).set("redelivered", uint64_t{d.redelivery_count > 0 ? 1u : 0u});
      m.set("exchange", msg.exchange).set("routing-key", msg.routing_key);
      if (puller) m.set("message-count", message_count);
      send_with_content(ch->id, m, consumer->stream ? with_stream_offset(msg.properties, offset) : msg.properties,
                        msg.body);
      ++delivered;
      if (!no_ack) {
        Unacked u{consumer, d.position, index, batch_size, nullptr};
        if (dead_letters) u.message = std::make_shared<const AmqpMessage>(msg);
        ch->unacked[tag] = std::move(u);
      }
    }
    if (!returned.empty() && returned.back() == d.position) continue;
    if (no_ack) settled.push_back(d.position);
  }
  const auto skipped = static_cast<uint32_t>(passed_over.size());
  auto settle = [&service = service_, consumer, settled = std::move(settled), returned = std::move(returned),
                 passed_over = std::move(passed_over)]() {
    if (settled.empty() && returned.empty() && passed_over.empty()) return;
    on_subscription_ops(service, consumer, [settled, returned, passed_over](SubscriptionOps& s) {
      for (const auto& p : settled) s.ack(p);
      for (const auto& u : passed_over) {
        if (u.batch_size > 1) {
          s.ack_batch_index(u.position, u.batch_index, u.batch_size);
        } else {
          s.ack(u.position);
        }
      }
      if (!returned.empty()) s.redeliver(returned);
    });
  };
  if (dead.empty()) {
    settle();
  } else {
    // Acknowledged once the dead-lettered copies are stored.
    auto left = std::make_shared<std::atomic<size_t>>(dead.size());
    auto once = std::make_shared<decltype(settle)>(std::move(settle));
    for (const auto& msg : dead) {
      dead_letter(service_, *limits, msg, "expired", [left, once](Status) {
        if (left->fetch_sub(1) == 1) (*once)();
      });
    }
  }
  AmqpMetrics::get().delivered.inc(delivered);
  AmqpMetrics::get().chunks_skipped.inc(chunks);
  // Without a prefetch limit the window refills as messages go out; expired
  // ones and skipped chunks always give their permits back.
  const uint32_t given_back = expired_messages + chunks + skipped;
  uint32_t refill = given_back + (!puller && consumer->prefetch == 0 ? delivered : 0);
  if (puller && given_back > 0 && !ch->gets.empty()) {
    // The get that asked for the expired message (or chunk) asks again.
    return grant(consumer, given_back);
  }
  if (refill > 0 && !puller) grant(consumer, refill);
}

void AmqpConnection::grant(const std::shared_ptr<QueueConsumer>& consumer, uint32_t n) {
  if (consumer->cancelled || n == 0) return;
  if (conn_ != nullptr && !conn_->writable()) {
    held_grants_.emplace_back(consumer, n);
    return;
  }
  on_subscription_ops(service_, consumer, [n](SubscriptionOps& s) { s.flow(n); });
}

void AmqpConnection::uncount(const QueueConsumer& consumer) {
  // Pullers are not counted; a priority consumer counts once, as level 0.
  if (consumer.tag.empty() || consumer.level != 0) return;
  service_.write(vhost_, [&](Topology& t, AmqpService::Persist&) {
    QueueDef* q = t.mutable_queue(consumer.queue);
    if (q == nullptr) return;
    if (q->consumers > 0) --q->consumers;
    if (q->exclusive_consumer == consumer.broker_id) q->exclusive_consumer = 0;
  });
}

void AmqpConnection::detach(const std::shared_ptr<QueueConsumer>& consumer) {
  if (consumer->group && !consumer->group->levels.empty()) {
    // Every level goes; what waited for the client goes back with them.
    auto group = consumer->group;
    auto levels = std::move(group->levels);
    group->levels.clear();
    group->waiting.clear();
    for (const auto& level : levels) detach(level);
    return;
  }
  if (consumer->cancelled) return;
  consumer->cancelled = true;
  uncount(*consumer);
  // The lambda keeps the consumer (and its sink) alive until the broker
  // has let go of it. Posted from this reactor after the consumer's
  // subscribe, it runs after it even while the topic still loads
  // (with_existing_topic waits behind a load under way).
  if (consumer->remote) {
    // Its member removes it; an auto-delete queue goes with its last consumer there.
    const QueueRef* q = consumer->limits.get();
    const bool auto_delete = q != nullptr && q->auto_delete && !consumer->tag.empty() && !service_.stopping();
    consumer->remote->close(auto_delete ? q->name : std::string());
    return;
  }
  if (consumer->stream) {
    // The consumer's own reader goes with it.
    service_.broker().with_existing_topic(consumer->topic, false, [consumer](Result<broker::Topic*> t) {
      if (t.is_ok()) (*t)->remove_consumer(consumer->subscription, consumer->broker_id);
    });
    return;
  }
  on_subscription(service_, consumer, [&service = service_, consumer](broker::Subscription& s, uint64_t id) {
    s.remove_consumer(id);
    // An auto-delete queue goes with its last consumer.
    const QueueRef* q = consumer->limits.get();
    if (q != nullptr && q->auto_delete && !consumer->tag.empty() && s.consumer_count() == 0 && !service.stopping()) {
      delete_queues(service, q->vhost, {q->name});
    }
  });
}

void AmqpConnection::consumer_closed(uint16_t channel_id, uint64_t serial,
                                     const std::shared_ptr<QueueConsumer>& consumer) {
  if (consumer->cancelled) return;
  if (consumer->group && !consumer->group->levels.empty()) {
    // One level closed (its topic deleted): the consumer goes as a whole.
    detach(consumer->group->levels.front());
  } else {
    consumer->cancelled = true;
    uncount(*consumer);
  }
  Channel* ch = channel(channel_id, serial);
  if (ch == nullptr) return;
  if (consumer->tag.empty()) {
    ch->pullers.erase(consumer->queue);
    if (!ch->gets.empty()) answer_empty(*this, *ch);
    return;
  }
  // The queue went away under the consumer: tell the client
  // (consumer_cancel_notify).
  ch->consumers.erase(consumer->tag);
  Method m = Method::of(m::kBasicCancel);
  m.set("consumer-tag", consumer->tag).set("no-wait", uint64_t{1});
  send_method(ch->id, m);
}

void release_consumers(AmqpConnection& c, Channel& ch) {
  for (auto& [tag, consumer] : ch.consumers) c.detach(consumer);
  for (auto& [queue, puller] : ch.pullers) c.detach(puller);
  ch.consumers.clear();
  ch.pullers.clear();
  ch.gets.clear();
  if (ch.get_timer) ch.get_timer->cancel();
}

void handle_consume(AmqpConnection& c, Channel& ch, const Method& m) {
  switch (m.key()) {
    case m::kBasicQos:
      // As RabbitMQ: without `global` the count is each new consumer's; with
      // it, a limit on the channel's unacknowledged deliveries, whichever
      // consumer made them, from now on. prefetch-size is not limited.
      if (m.flag("global")) {
        set_global_prefetch(c, ch, static_cast<uint16_t>(m.u("prefetch-count")));
      } else {
        ch.prefetch = static_cast<uint16_t>(m.u("prefetch-count"));
      }
      return c.send_method(ch.id, Method::of(m::kBasicQosOk));
    case m::kBasicConsume: return consume(c, ch, m);
    case m::kBasicCancel: return cancel(c, ch, m);
    case m::kBasicGet: return get(c, ch, m);
    default:
      return c.connection_error({kCommandInvalid, fmt::format("{} is not a method a client sends", m.spec->name), m.key()});
  }
}

}  // namespace magnetar::protocol::amqp
