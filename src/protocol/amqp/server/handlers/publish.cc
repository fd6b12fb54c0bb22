// basic.publish (with its content), confirm.select, tx.*: a message is routed
// by its exchange to queues, converted once to a Pulsar entry (convert.h)
// and appended to each queue's topic. With confirms on, basic.ack goes out
// once every copy is stored (basic.nack when one failed or a queue at its
// length refused it, x-overflow reject-publish; a queue over its
// producer count limit closes the channel with 403); a message that
// reaches no queue is confirmed at once, and with `mandatory` it comes back
// first as basic.return NO_ROUTE.
//
// Without confirms a publish that cannot be stored (a backlog quota that
// refuses producers, storage refusing writes, a topic closing) is logged at
// warn and counted (magnetar_amqp_unconfirmed_publish_failures_total); the
// channel stays open, as RabbitMQ keeps it when a queue cannot take a
// message: a publisher without confirms chose at-most-once and has no way
// to hear of one message, and closing its channel would fail every publish
// after it as well. Publishers that must know use confirms (basic.nack).
#include <memory>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/logging.h"
#include "common/stage_timing.h"
#include "protocol/amqp/convert.h"
#include "protocol/amqp/errors.h"
#include "protocol/amqp/server/amqp_connection.h"
#include "protocol/amqp/server/forwarding.h"
#include "protocol/pulsar/frame.h"

namespace magnetar::protocol::amqp {

using common::Result;
using common::Slice;
using common::Status;

void handle_publish(AmqpConnection& c, Channel& ch, const Method& publish, const ContentHeader& header, Slice body) {
  const int64_t received_ns = common::monotonic_ns();
  if (ch.tx) {
    if (c.hold_in_tx(ch, body.size(), publish.key())) ch.tx_publishes.push_back({publish, header, std::move(body)});
    return;
  }
  const std::string& exchange = publish.str("exchange");
  const std::string& routing_key = publish.str("routing-key");
  if (body.size() > pulsar::kDefaultMaxMessageSize) {
    return c.channel_error(ch, {kPreconditionFailed, fmt::format("message size {} is larger than the largest message {}",
                                                                 body.size(), pulsar::kDefaultMaxMessageSize),
                                publish.key()});
  }
  AmqpError error;
  std::vector<RoutedCopy> copies;  // each routed queue, and the level a priority queue takes it on
  c.service().read(c.vhost(), [&](const Topology& t) {
    const ExchangeDef* e = t.exchange(exchange);
    if (e == nullptr) {
      error = {kNotFound, fmt::format("no exchange '{}' in vhost '{}'", exchange, c.vhost_name()), publish.key()};
    } else if (e->internal) {
      error = {kAccessRefused, fmt::format("cannot publish to internal exchange '{}'", exchange), publish.key()};
    } else {
      const FieldTable* headers = header.properties.headers ? &*header.properties.headers : nullptr;
      for (auto& name : t.route(exchange, routing_key, headers)) {
        const QueueDef* q = t.queue(name);
        const uint8_t level = q != nullptr ? q->parsed.level_of(header.properties.priority) : 0;
        copies.push_back({std::move(name), level});
      }
    }
  });
  if (error.code != 0) return c.channel_error(ch, error);
  const uint64_t seq = ch.confirm ? c.next_confirm(ch) : 0;
  if (copies.empty()) {
    if (publish.flag("mandatory")) {
      Method ret = Method::of(m::kBasicReturn);
      ret.set("reply-code", uint64_t{kNoRoute}).set("reply-text", std::string("NO_ROUTE"));
      ret.set("exchange", exchange).set("routing-key", routing_key);
      c.send_with_content(ch.id, ret, header.raw_properties, body);
    }
    if (seq != 0) c.settle_confirm(ch, seq, true);
    return;
  }
  std::vector<broker::TopicName> topics;
  topics.reserve(copies.size());
  for (const RoutedCopy& copy : copies) {
    // Queue names were checked when declared.
    if (auto topic = AmqpService::queue_topic(c.vhost(), copy.queue, copy.level)) topics.push_back(*topic);
  }
  for (const auto& topic : topics) {
    if (!c.authorized(ch, topic, broker::TopicAction::kProduce, publish.key())) return;
  }
  auto p = std::make_shared<Publication>();
  p->vhost = c.vhost();
  p->copies = std::move(copies);
  p->message = AmqpMessage{exchange, routing_key, header.raw_properties, body};
  p->publish_time_ms = common::wall_clock_ms();
  p->producer_name = c.producer_name();
  p->sequence = c.next_sequence();
  p->producer_id = c.producer_for_all(topics);
  p->client = c.client_info();
  p->entry = message_to_entry(exchange, routing_key, header, body.view(), p->publish_time_ms, p->producer_name,
                              p->sequence);
  // A publish routed to one queue is timed by stage (several: not one path).
  p->timed = p->copies.size() == 1;
  p->marks.received_ns = received_ns;
  std::shared_ptr<const Publication> timed = p->timed ? p : nullptr;
  AmqpMetrics::get().published.inc();
  const size_t bytes = body.size();
  c.publish_started(ch, bytes);
  c.charge_publish(topics, static_cast<int64_t>(bytes));
  // Where it went, for the warning about a publish without confirms that
  // was not stored; made only for those.
  using Route = std::pair<std::string, std::string>;
  auto route = seq == 0 ? std::make_shared<const Route>(exchange, routing_key) : nullptr;
  // `rejected`: a gated queue refused it (nacked with confirms; without,
  // counted and dropped as RabbitMQ drops it).
  auto settled = [reply = c.replier(), seq, id = ch.id, serial = ch.serial, key = publish.key(), bytes, route,
                  timed](Status st, bool rejected) {
    reply([st, rejected, seq, id, serial, key, bytes, route, timed](AmqpConnection& conn) {
      Channel* chan = conn.channel(id, serial);
      if (chan != nullptr && st.code() == common::ErrorCode::kLimitReached) {
        // A queue refused another publisher: say so even without confirms,
        // as a publish without permission is refused.
        conn.channel_error(*chan, {reply_code(st), st.message(), key});
      } else if (seq != 0) {
        if (chan != nullptr) conn.settle_confirm(*chan, seq, st.is_ok() && !rejected);
      } else if (!st.is_ok()) {
        conn.unconfirmed_publish_failed(route->first, route->second, st);
      }
      conn.publish_finished(id, serial, bytes);
      if (timed && st.is_ok() && !rejected) {
        broker::PublishStages::of(broker::PublishProtocol::kAmqp).record(timed->marks);
      }
    });
  };
  store_publication(c.service(), std::move(p), std::move(settled));
}

void handle_confirm_tx(AmqpConnection& c, Channel& ch, const Method& m) {
  switch (m.key()) {
    case m::kConfirmSelect:
      if (ch.tx) {
        return c.channel_error(ch, {kPreconditionFailed, "cannot switch from tx to confirm mode", m.key()});
      }
      ch.confirm = true;
      return c.answer(ch, m, Method::of(m::kConfirmSelectOk));
    case m::kTxSelect:
      if (ch.confirm) {
        return c.channel_error(ch, {kPreconditionFailed, "cannot switch from confirm to tx mode", m.key()});
      }
      ch.tx = true;
      return c.send_method(ch.id, Method::of(m::kTxSelectOk));
    case m::kTxRollback:
      if (!ch.tx) return c.channel_error(ch, {kPreconditionFailed, "channel is not transactional", m.key()});
      c.take_tx(ch);
      return c.send_method(ch.id, Method::of(m::kTxRollbackOk));
    case m::kTxCommit: {
      if (!ch.tx) return c.channel_error(ch, {kPreconditionFailed, "channel is not transactional", m.key()});
      auto [publishes, settles] = c.take_tx(ch);
      if (publishes.empty() && settles.empty()) return c.send_method(ch.id, Method::of(m::kTxCommitOk));
      const uint16_t id = ch.id;
      const uint64_t serial = ch.serial;
      ch.tx = false;
      for (auto& p : publishes) {
        if (c.channel(id, serial) == nullptr) return;  // a publish failed: the channel is closed
        handle_publish(c, ch, p.method, *p.header, std::move(p.body));
      }
      for (auto& settle : settles) {
        if (c.channel(id, serial) == nullptr) return;
        handle_ack(c, ch, settle);
      }
      if (c.channel(id, serial) == nullptr) return;
      ch.tx = true;
      // commit-ok once the publishes are stored: this commit, now with
      // nothing left to do, waits behind them.
      if (ch.publishes_in_flight > 0) {
        c.defer(ch, {m, std::nullopt, {}});
        return;
      }
      return c.send_method(ch.id, Method::of(m::kTxCommitOk));
    }
    default:
      return c.connection_error({kCommandInvalid, fmt::format("{} is not a method a client sends", m.spec->name), m.key()});
  }
}

}  // namespace magnetar::protocol::amqp
