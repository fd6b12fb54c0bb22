// SUBSCRIBE, FLOW, ACK, REDELIVER_UNACKNOWLEDGED_MESSAGES, CLOSE_CONSUMER,
// UNSUBSCRIBE, GET_LAST_MESSAGE_ID: consuming from a subscription.
#include "common/logging.h"
#include "protocol/pulsar/commands.h"
#include "protocol/pulsar/server/pulsar_connection.h"

namespace magnetar::protocol::pulsar {

using common::Result;
using common::Status;

namespace {

broker::SubscriptionType sub_type(proto::CommandSubscribe::SubType t) {
  switch (t) {
    case proto::CommandSubscribe::Shared: return broker::SubscriptionType::kShared;
    case proto::CommandSubscribe::Failover: return broker::SubscriptionType::kFailover;
    case proto::CommandSubscribe::Key_Shared: return broker::SubscriptionType::kKeyShared;
    default: return broker::SubscriptionType::kExclusive;
  }
}

ledger::Position position_of(const proto::MessageIdData& id) {
  return ledger::Position{id.ledgerid(), static_cast<storage::EntryId>(id.entryid())};
}

// Runs `fn(subscription, broker consumer id)` on the home reactor of the
// client's consumer `consumer_id`, if the connection has it.
void with_subscription(PulsarConnection& c, uint64_t consumer_id,
                       std::function<void(broker::Subscription&, uint64_t)> fn) {
  auto it = c.consumers.find(consumer_id);
  if (it == c.consumers.end()) {
    MLOG_DEBUG("pulsar: no consumer {} on this connection", consumer_id);
    return;
  }
  c.service().broker().with_topic(it->second.topic, [sub = it->second.subscription, broker_id = it->second.broker_id,
                                                     fn = std::move(fn)](Result<broker::Topic*> t) {
    if (!t.is_ok()) return;
    if (auto* s = (*t)->subscription(sub)) fn(*s, broker_id);
  });
}

}  // namespace

void handle_subscribe(PulsarConnection& c, const proto::CommandSubscribe& cmd) {
  uint64_t request_id = cmd.request_id();
  auto topic = broker::TopicName::parse(cmd.topic());
  if (!topic) {
    c.send(commands::error(request_id, proto::InvalidTopicName, topic.status().message()));
    return;
  }
  uint64_t client_id = cmd.consumer_id();
  if (c.consumers.count(client_id)) {
    c.send(commands::success(request_id));  // a retry of a SUBSCRIBE that succeeded
    return;
  }
  broker::ConsumerOptions options;
  options.subscription = cmd.subscription();
  options.type = sub_type(cmd.subtype());
  options.consumer_name = cmd.consumer_name();
  options.priority = cmd.priority_level();
  options.durable = cmd.durable();
  options.initial_position = cmd.initialposition() == proto::CommandSubscribe::Earliest
                                 ? broker::InitialPosition::kEarliest
                                 : broker::InitialPosition::kLatest;
  uint64_t broker_id = c.service().next_id();
  auto sink = std::make_shared<PulsarConsumerSink>(c.link(), c.reactor(), client_id);
  std::string subscription = options.subscription;
  c.service().broker().with_topic(
      *topic, [reply = c.replier(), topic = *topic, broker_id, client_id, request_id, sink, subscription,
               options = std::move(options)](Result<broker::Topic*> t) mutable {
        if (!t.is_ok()) {
          reply([request_id, st = t.status()](PulsarConnection& conn) {
            conn.send(commands::error(request_id, server_error(st), st.message()));
          });
          return;
        }
        (*t)->subscribe(broker_id, std::move(options), sink.get(),
                        [reply, topic, broker_id, client_id, request_id, sink, subscription](Result<broker::Subscription*> s) {
                          reply([s_status = s.is_ok() ? Status::ok() : s.status(), topic, broker_id, client_id,
                                 request_id, sink, subscription](PulsarConnection& conn) {
                            if (!s_status.is_ok()) {
                              conn.send(commands::error(request_id, server_error(s_status), s_status.message()));
                              return;
                            }
                            conn.consumers[client_id] = {topic, subscription, broker_id, sink};
                            conn.send(commands::success(request_id));
                          });
                        });
      });
}

void handle_flow(PulsarConnection& c, const proto::CommandFlow& cmd) {
  uint32_t permits = cmd.messagepermits();
  with_subscription(c, cmd.consumer_id(), [permits](broker::Subscription& s, uint64_t id) { s.flow(id, permits); });
}

void handle_ack(PulsarConnection& c, const proto::CommandAck& cmd) {
  std::vector<ledger::Position> positions;
  for (const auto& id : cmd.message_id()) positions.push_back(position_of(id));
  bool cumulative = cmd.ack_type() == proto::CommandAck::Cumulative;
  uint64_t consumer_id = cmd.consumer_id();
  bool wants_answer = cmd.has_request_id();
  uint64_t request_id = cmd.request_id();
  with_subscription(c, consumer_id, [reply = c.replier(), positions, cumulative, consumer_id, wants_answer,
                                     request_id](broker::Subscription& s, uint64_t id) {
    Status st;
    for (auto p : positions) {
      Status one = cumulative ? s.ack_cumulative(id, p) : s.ack(id, p);
      if (!one.is_ok()) st = one;
    }
    if (!wants_answer) return;
    reply([consumer_id, request_id, st](PulsarConnection& conn) {
      proto::BaseCommand out;
      out.set_type(proto::BaseCommand::ACK_RESPONSE);
      auto* r = out.mutable_ackresponse();
      r->set_consumer_id(consumer_id);
      r->set_request_id(request_id);
      if (!st.is_ok()) {
        r->set_error(server_error(st));
        r->set_message(st.message());
      }
      conn.send(out);
    });
  });
}

void handle_redeliver(PulsarConnection& c, const proto::CommandRedeliverUnacknowledgedMessages& cmd) {
  std::vector<ledger::Position> positions;
  for (const auto& id : cmd.message_ids()) positions.push_back(position_of(id));
  with_subscription(c, cmd.consumer_id(), [positions](broker::Subscription& s, uint64_t id) {
    s.redeliver_unacknowledged(id, positions);
  });
}

void handle_close_consumer(PulsarConnection& c, const proto::CommandCloseConsumer& cmd) {
  auto it = c.consumers.find(cmd.consumer_id());
  if (it != c.consumers.end()) {
    auto sink = it->second.sink;  // alive until the broker has let go of it
    with_subscription(c, cmd.consumer_id(), [sink](broker::Subscription& s, uint64_t id) { s.remove_consumer(id); });
    c.consumers.erase(it);
  }
  c.send(commands::success(cmd.request_id()));
}

void handle_unsubscribe(PulsarConnection& c, const proto::CommandUnsubscribe& cmd) {
  uint64_t request_id = cmd.request_id();
  auto it = c.consumers.find(cmd.consumer_id());
  if (it == c.consumers.end()) {
    c.send(commands::error(request_id, proto::ConsumerNotFound, "no consumer with this id on this connection"));
    return;
  }
  auto state = it->second;
  c.consumers.erase(it);
  c.service().broker().with_topic(state.topic, [reply = c.replier(), state, request_id](Result<broker::Topic*> t) {
    Status st = t.is_ok() ? Status::ok() : t.status();
    if (st.is_ok()) {
      if (auto* s = (*t)->subscription(state.subscription)) s->remove_consumer(state.broker_id);
      st = (*t)->unsubscribe(state.subscription);
    }
    reply([request_id, st](PulsarConnection& conn) {
      conn.send(st.is_ok() ? commands::success(request_id)
                           : commands::error(request_id, server_error(st), st.message()));
    });
  });
}

void handle_get_last_message_id(PulsarConnection& c, const proto::CommandGetLastMessageId& cmd) {
  uint64_t request_id = cmd.request_id();
  auto it = c.consumers.find(cmd.consumer_id());
  if (it == c.consumers.end()) {
    c.send(commands::error(request_id, proto::ConsumerNotFound, "no consumer with this id on this connection"));
    return;
  }
  c.service().broker().with_topic(it->second.topic, [reply = c.replier(), request_id](Result<broker::Topic*> t) {
    if (!t.is_ok()) {
      reply([request_id, st = t.status()](PulsarConnection& conn) {
        conn.send(commands::error(request_id, server_error(st), st.message()));
      });
      return;
    }
    ledger::Position last = (*t)->log().last_confirmed();
    reply([request_id, last](PulsarConnection& conn) {
      proto::BaseCommand out;
      out.set_type(proto::BaseCommand::GET_LAST_MESSAGE_ID_RESPONSE);
      auto* r = out.mutable_getlastmessageidresponse();
      r->set_request_id(request_id);
      *r->mutable_last_message_id() = commands::message_id(last.ledger, static_cast<uint64_t>(last.entry));
      conn.send(out);
    });
  });
}

}  // namespace magnetar::protocol::pulsar
