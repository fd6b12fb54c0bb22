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
#include "protocol/amqp/server/amqp_connection.h"

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

// Attaches `consumer` to its queue's subscription; `then` runs on the
// connection with the outcome, before any delivery; the first permits are
// given after it.
void attach(AmqpConnection& c, Channel& ch, const std::shared_ptr<QueueConsumer>& consumer, uint32_t permits,
            std::function<void(AmqpConnection&, Channel&, Status)> then) {
  broker::ConsumerOptions options;
  options.subscription = queue_subscription();
  options.type = consumer->single_active ? broker::SubscriptionType::kFailover : broker::SubscriptionType::kShared;
  // A puller of a single-active-consumer queue never takes the place of a
  // consumer: it is active only while no consumer is attached.
  if (consumer->single_active && consumer->tag.empty()) options.priority = INT32_MAX;
  options.consumer_name = consumer->tag.empty() ? "basic.get" : consumer->tag;
  options.initial_position = broker::InitialPosition::kLatest;
  options.client = c.client_info();
  c.service().broker().with_topic(
      consumer->topic, [reply = c.replier(ch), consumer, permits, options = std::move(options),
                        then](Result<broker::Topic*> t) mutable {
        if (!t.is_ok()) {
          return reply([then, st = t.status()](AmqpConnection& conn, Channel& chan) { then(conn, chan, st); });
        }
        (*t)->subscribe(consumer->broker_id, std::move(options), consumer->sink.get(),
                        [reply, consumer, permits, then](Result<broker::Subscription*> s) {
                          Status st = s.is_ok() ? Status::ok() : s.status();
                          reply([then, st](AmqpConnection& conn, Channel& chan) { then(conn, chan, st); });
                          if (s.is_ok() && permits > 0) (*s)->flow(consumer->broker_id, permits);
                        });
      });
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
  consumer->no_ack = m.flag("no-ack");
  consumer->prefetch = consumer->no_ack ? 0 : ch.prefetch;
  consumer->sink = std::make_shared<AmqpConsumerSink>(c.link(), c.reactor(), ch.id, ch.serial);
  consumer->sink->attach(consumer);
  consumer->limits = limits_of(c, q);
  consumer->single_active = q.parsed.single_active_consumer;
  if (!count_consumer(c, ch, m, *consumer, m.flag("exclusive"))) return;
  ch.consumers[tag] = consumer;
  const uint32_t permits = consumer->prefetch > 0 ? consumer->prefetch : kUnlimitedWindow;
  attach(c, ch, consumer, permits, [m, consumer](AmqpConnection& conn, Channel& chan, Status st) {
    if (!st.is_ok()) {
      chan.consumers.erase(consumer->tag);
      conn.uncount(*consumer);
      consumer->cancelled = true;
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

void get(AmqpConnection& c, Channel& ch, const Method& m) {
  QueueDef q;
  if (!find_queue(c, ch, m.str("queue"), m.key(), &q)) return;
  if (!c.authorized(ch, *AmqpService::queue_topic(c.vhost(), q.name), broker::TopicAction::kConsume, m.key())) return;
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
  // Asks the puller's subscription for one message if the queue has one
  // ready; otherwise answers get-empty.
  auto pull = [](AmqpConnection& conn, Channel& chan, const std::shared_ptr<QueueConsumer>& p) {
    on_subscription(conn.service(), p, [reply = conn.replier(chan), p](broker::Subscription& s, uint64_t id) {
      auto stats = s.stats();
      const uint64_t ready =
          stats.backlog_messages > stats.unacked_messages ? stats.backlog_messages - stats.unacked_messages : 0;
      if (ready == 0) return reply([](AmqpConnection& c2, Channel& ch2) { answer_empty(c2, ch2); });
      // Reaches the channel before the delivery the permit brings.
      reply([ready](AmqpConnection&, Channel& ch2) {
        if (!ch2.gets.empty()) ch2.gets.front().message_count = ready - 1;
      });
      s.flow(id, 1);
    });
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
  attach(c, ch, puller, 0, [m, puller, pull](AmqpConnection& conn, Channel& chan, Status st) {
    if (!st.is_ok()) {
      chan.pullers.erase(puller->queue);
      chan.gets.clear();
      return conn.channel_error(chan, {reply_code(st), st.message(), m.key()});
    }
    pull(conn, chan, puller);
  });
}

}  // namespace

void on_subscription(AmqpService& service, const std::shared_ptr<QueueConsumer>& consumer,
                     std::function<void(broker::Subscription&, uint64_t)> fn) {
  service.broker().with_existing_topic(consumer->topic, false,
                                       [consumer, fn = std::move(fn)](Result<broker::Topic*> t) {
                                         if (!t.is_ok()) return;
                                         if (auto* s = (*t)->subscription(queue_subscription())) fn(*s, consumer->broker_id);
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
  const QueueRef* limits = consumer->limits.get();
  const bool dead_letters = limits != nullptr && limits->args.dead_letter_exchange.has_value();
  const int64_t now = common::wall_clock_ms();
  uint32_t delivered = 0;
  uint32_t expired_messages = 0;
  uint32_t chunks = 0;  // entries holding a chunk of a chunked Pulsar message: settled, never delivered raw
  std::vector<ledger::Position> settled;   // acknowledged at once (no-ack, expired)
  std::vector<ledger::Position> returned;  // back to the queue (a puller nobody waits on)
  std::vector<AmqpMessage> dead;           // expired: dead-lettered before they are settled
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
    if (!messages.empty() && expired(limits != nullptr ? limits->args : QueueArguments{}, messages.front(),
                                     d.header.publish_time_ms, now)) {
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
      send_with_content(ch->id, m, msg.properties, msg.body);
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
  auto settle = [&service = service_, consumer, settled = std::move(settled), returned = std::move(returned)]() {
    if (settled.empty() && returned.empty()) return;
    on_subscription(service, consumer, [settled, returned](broker::Subscription& s, uint64_t id) {
      for (const auto& p : settled) (void)s.ack(id, p);
      if (!returned.empty()) s.redeliver_unacknowledged(id, returned);
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
  const uint32_t given_back = expired_messages + chunks;
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
  on_subscription(service_, consumer, [n](broker::Subscription& s, uint64_t id) { s.flow(id, n); });
}

void AmqpConnection::uncount(const QueueConsumer& consumer) {
  if (consumer.tag.empty()) return;  // pullers are not counted
  service_.write(vhost_, [&](Topology& t, AmqpService::Persist&) {
    QueueDef* q = t.mutable_queue(consumer.queue);
    if (q == nullptr) return;
    if (q->consumers > 0) --q->consumers;
    if (q->exclusive_consumer == consumer.broker_id) q->exclusive_consumer = 0;
  });
}

void AmqpConnection::detach(const std::shared_ptr<QueueConsumer>& consumer) {
  if (consumer->cancelled) return;
  consumer->cancelled = true;
  uncount(*consumer);
  // The lambda keeps the consumer (and its sink) alive until the broker
  // has let go of it. Posted from this reactor after the consumer's
  // subscribe, it runs after it even while the topic still loads
  // (with_existing_topic waits behind a load under way).
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
  consumer->cancelled = true;
  uncount(*consumer);
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
      ch.prefetch = static_cast<uint16_t>(m.u("prefetch-count"));
      return c.send_method(ch.id, Method::of(m::kBasicQosOk));
    case m::kBasicConsume: return consume(c, ch, m);
    case m::kBasicCancel: return cancel(c, ch, m);
    case m::kBasicGet: return get(c, ch, m);
    default:
      return c.connection_error({kCommandInvalid, fmt::format("{} is not a method a client sends", m.spec->name), m.key()});
  }
}

}  // namespace magnetar::protocol::amqp
