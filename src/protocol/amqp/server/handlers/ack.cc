// basic.ack, basic.nack, basic.reject, basic.recover(-async): settling
// deliveries. Acknowledged messages are acknowledged on the queue's
// subscription (one message of a batch entry by its batch index); requeued
// ones are redelivered by the subscription (marked redelivered); a message
// rejected without requeue is dropped. Each settled message of a consumer
// with a prefetch limit gives it one permit back.
#include <fmt/format.h>

#include "common/logging.h"
#include "protocol/amqp/server/amqp_connection.h"

namespace magnetar::protocol::amqp {

namespace {

enum class Settle { kAck, kRequeue, kDrop };

// Settles `taken` on the broker, grouped by consumer. Dropped messages of
// a queue that dead-letters are acknowledged once their copies are stored.
void settle(AmqpConnection& c, std::vector<Unacked> taken, Settle how) {
  // A stream keeps every message whatever its readers say: a requeue or a
  // reject is an acknowledgement, which gives the consumer its credit back.
  if (how != Settle::kAck) {
    std::vector<Unacked> streamed;
    std::erase_if(taken, [&streamed](Unacked& u) {
      if (!u.consumer->stream) return false;
      streamed.push_back(std::move(u));
      return true;
    });
    if (!streamed.empty()) settle(c, std::move(streamed), Settle::kAck);
  }
  if (how == Settle::kDrop) {
    std::vector<Unacked> plain;
    for (auto& u : taken) {
      if (u.message == nullptr || u.consumer->limits == nullptr) {
        plain.push_back(std::move(u));
        continue;
      }
      const uint32_t permits = u.consumer->prefetch > 0 ? 1 : 0;
      auto consumer = u.consumer;
      auto message = u.message;  // `u` moves into the callback below
      dead_letter(c.service(), *consumer->limits, *message, "rejected",
                  [&service = c.service(), u = std::move(u)](common::Status) {
                    on_subscription_ops(service, u.consumer, [u](SubscriptionOps& s) {
                      if (u.batch_size > 1) {
                        s.ack_batch_index(u.position, u.batch_index, u.batch_size);
                      } else {
                        s.ack(u.position);
                      }
                    });
                  });
      if (permits > 0) c.grant(consumer, permits);
    }
    taken = std::move(plain);
    if (taken.empty()) return;
  }
  std::map<QueueConsumer*, std::vector<Unacked>> by_consumer;
  for (auto& u : taken) by_consumer[u.consumer.get()].push_back(std::move(u));
  for (auto& [ptr, list] : by_consumer) {
    auto consumer = list.front().consumer;
    const auto n = static_cast<uint32_t>(list.size());
    on_subscription_ops(c.service(), consumer, [list = std::move(list), how](SubscriptionOps& s) {
      if (how == Settle::kRequeue) {
        std::vector<ledger::Position> positions;
        for (const auto& u : list) {
          if (positions.empty() || positions.back() != u.position) positions.push_back(u.position);
        }
        s.redeliver(positions);
        return;
      }
      for (const auto& u : list) {
        if (u.batch_size > 1) {
          s.ack_batch_index(u.position, u.batch_index, u.batch_size);
        } else {
          s.ack(u.position);
        }
      }
    });
    if (consumer->prefetch > 0) c.grant(consumer, n);
  }
}

// Takes the deliveries `tag` names (with `multiple`, every one up to it; tag
// 0 with multiple: all) out of the channel's unacknowledged set. False when
// a single tag is unknown.
bool take(Channel& ch, uint64_t tag, bool multiple, std::vector<Unacked>* out) {
  if (multiple) {
    auto end = tag == 0 ? ch.unacked.end() : ch.unacked.upper_bound(tag);
    for (auto it = ch.unacked.begin(); it != end;) {
      out->push_back(std::move(it->second));
      it = ch.unacked.erase(it);
    }
    return true;
  }
  auto it = ch.unacked.find(tag);
  if (it == ch.unacked.end()) return false;
  out->push_back(std::move(it->second));
  ch.unacked.erase(it);
  return true;
}

// Priority consumers whose deliveries `taken` settles get that room back
// (AmqpConnection::release_gated then sends what their levels hold).
void release_room(const std::vector<Unacked>& taken) {
  for (const auto& u : taken) {
    const auto& group = u.consumer->group;
    if (group && group->in_client > 0) --group->in_client;
  }
}

}  // namespace

void handle_ack(AmqpConnection& c, Channel& ch, const Method& m) {
  const uint32_t key = m.key();
  if (key == m::kBasicRecover || key == m::kBasicRecoverAsync) {
    // Everything unacknowledged goes back to its queue (requeue=false is
    // not offered by RabbitMQ either).
    std::vector<Unacked> all;
    take(ch, 0, true, &all);
    release_room(all);
    settle(c, std::move(all), Settle::kRequeue);
    if (key == m::kBasicRecover) c.send_method(ch.id, Method::of(m::kBasicRecoverOk));
    return c.release_gated(ch);
  }
  if (ch.tx) {
    if (c.hold_in_tx(ch, 0, key)) ch.tx_settles.push_back(m);  // applied at tx.commit
    return;
  }
  const uint64_t tag = m.u("delivery-tag");
  const bool multiple = key != m::kBasicReject && m.flag("multiple");
  std::vector<Unacked> taken;
  if (!take(ch, tag, multiple, &taken)) {
    return c.channel_error(ch, {kPreconditionFailed, fmt::format("unknown delivery tag {}", tag), key});
  }
  Settle how = Settle::kAck;
  if (key != m::kBasicAck) how = m.flag("requeue") ? Settle::kRequeue : Settle::kDrop;
  release_room(taken);
  settle(c, std::move(taken), how);
  c.release_gated(ch);
}

}  // namespace magnetar::protocol::amqp
