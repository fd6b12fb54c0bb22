// SUBSCRIBE, FLOW, ACK, REDELIVER_UNACKNOWLEDGED_MESSAGES, CLOSE_CONSUMER,
// UNSUBSCRIBE, GET_LAST_MESSAGE_ID: consuming from a subscription.
#include <algorithm>

#include "common/clock.h"
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

// Where a reader asked to start at `id` (SUBSCRIBE's start_message_id)
// starts, as Pulsar's broker reads it: MessageId.earliest (ledger -1) is
// before everything and MessageId.latest lies past the end; any other id is
// delivered itself, the cursor stepping back one entry, so that the client
// can skip the messages of a batch before the id's batch index and drop the
// start message itself unless its reader is inclusive. Pulsar's broker
// always sees a batch id there, batch index or not.
ledger::Position start_after(const proto::MessageIdData& id) {
  const auto ledger = static_cast<int64_t>(id.ledgerid());
  const auto entry = static_cast<int64_t>(id.entryid());
  if (ledger < 0) return ledger::Position{0, storage::kNoEntry};
  return ledger::Position{id.ledgerid(), entry >= 0 ? entry - 1 : storage::kNoEntry};
}

// Key_Shared options from SUBSCRIBE's keySharedMeta (none: AUTO_SPLIT).
void key_shared_options(const proto::CommandSubscribe& cmd, broker::ConsumerOptions& options) {
  if (!cmd.has_keysharedmeta()) return;
  const auto& meta = cmd.keysharedmeta();
  options.key_shared_mode =
      meta.keysharedmode() == proto::STICKY ? broker::KeySharedMode::kSticky : broker::KeySharedMode::kAutoSplit;
  options.allow_out_of_order = meta.allowoutoforderdelivery();
  for (const auto& r : meta.hashranges()) {
    // Negative bounds wrap to huge values, which the selector refuses.
    options.hash_ranges.push_back({static_cast<uint32_t>(r.start()), static_cast<uint32_t>(r.end())});
  }
}

// SUBSCRIBE's error code: the selector refusing a Key_Shared consumer
// (overlapping sticky ranges, no range left) is Pulsar's ConsumerAssignError;
// a count limit (kLimitReached) is ConsumerBusy for every subscription type.
proto::ServerError subscribe_error(const Status& st, broker::SubscriptionType type) {
  if (type == broker::SubscriptionType::kKeyShared &&
      (st.code() == common::ErrorCode::kFailedPrecondition || st.code() == common::ErrorCode::kResourceExhausted)) {
    return proto::ConsumerAssignError;
  }
  if (st.code() == common::ErrorCode::kInvalidArgument) return proto::NotAllowedError;
  return server_error(st);
}

struct AckRequest {
  ledger::Position position;
  std::vector<uint64_t> unacked;  // ack_set: the batch's messages not acknowledged; empty: the whole entry
  uint32_t batch_size = 0;        // 0: unknown
};

// Runs `fn(subscription, broker consumer id)` on the home reactor of the
// client's consumer `consumer_id`, if the connection has it.
void with_subscription(PulsarConnection& c, uint64_t consumer_id,
                       std::function<void(broker::Subscription&, uint64_t)> fn) {
  auto it = c.consumers.find(consumer_id);
  if (it == c.consumers.end()) {
    MLOG_DEBUG("pulsar: no consumer {} on this connection", consumer_id);
    return;
  }
  c.with_subscription(it->second, std::move(fn));
}

}  // namespace

namespace {

void attach_consumer(PulsarConnection& c, const proto::CommandSubscribe& cmd, const broker::TopicName& topic_name) {
  const broker::TopicName* topic = &topic_name;
  uint64_t request_id = cmd.request_id();
  uint64_t client_id = cmd.consumer_id();
  if (c.consumers.count(client_id)) return;  // a retry overtook the schema registration
  broker::ConsumerOptions options;
  options.subscription = cmd.subscription();
  options.type = sub_type(cmd.subtype());
  options.consumer_name = cmd.consumer_name();
  options.client = c.client_info();
  options.priority = cmd.priority_level();
  options.durable = cmd.durable();
  options.read_compacted = cmd.read_compacted();
  options.replicate_state = cmd.replicate_subscription_state();
  options.initial_position = cmd.initialposition() == proto::CommandSubscribe::Earliest
                                 ? broker::InitialPosition::kEarliest
                                 : broker::InitialPosition::kLatest;
  // A set start_message_id wins over the initial position (readers only,
  // as in Pulsar: a durable subscription starts where initialPosition says).
  if (!options.durable && cmd.has_start_message_id()) options.start_after = start_after(cmd.start_message_id());
  constexpr uint64_t kMaxRollbackSec = uint64_t{1} << 40;  // past any publish time; no overflow in ms
  if (cmd.start_message_rollback_duration_sec() > 0) {
    options.rollback_ms = static_cast<int64_t>(std::min(cmd.start_message_rollback_duration_sec(), kMaxRollbackSec)) * 1000;
  }
  if (options.type == broker::SubscriptionType::kKeyShared) key_shared_options(cmd, options);
  // What the broker may hand the consumer beyond what reached the
  // connection (PulsarConnection::hand_credit gives it back).
  const int64_t credit = static_cast<int64_t>(std::max<uint64_t>(1, c.service().options().consumer_credit_bytes));
  options.delivery_credit = credit;
  broker::SubscriptionType type = options.type;
  uint64_t broker_id = c.service().next_id();
  auto sink = std::make_shared<PulsarConsumerSink>(c.link(), c.reactor(), client_id, broker_id, topic->partition);
  std::string subscription = options.subscription;
  c.service().broker().with_topic(
      *topic, [reply = c.request_replier(), topic = *topic, broker_id, client_id, request_id, sink, subscription, type,
               credit, options = std::move(options)](Result<broker::Topic*> t) mutable {
        if (!t.is_ok()) {
          reply([request_id, st = t.status()](PulsarConnection& conn) {
            conn.send(commands::error(request_id, topic_load_error(st), st.message()));
          });
          return;
        }
        (*t)->subscribe(broker_id, std::move(options), sink.get(),
                        [reply, topic, broker_id, client_id, request_id, sink, subscription, type,
                         credit](Result<broker::Subscription*> s) {
                          reply([s_status = s.is_ok() ? Status::ok() : s.status(), topic, broker_id, client_id,
                                 request_id, sink, subscription, type, credit](PulsarConnection& conn) {
                            if (!s_status.is_ok()) {
                              conn.send(
                                  commands::error(request_id, subscribe_error(s_status, type), s_status.message()));
                              return;
                            }
                            conn.consumers.insert_or_assign(
                                client_id, PulsarConnection::ConsumerState{topic, subscription, broker_id, sink,
                                                                           DeliveryCredit(credit)});
                            conn.send(commands::success(request_id));
                          });
                        });
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
  const broker::Authorization& authorization = c.service().authorization();
  common::Status allowed = authorization.check(c.role, *topic, broker::TopicAction::kConsume);
  if (allowed.is_ok()) allowed = authorization.check_subscription(c.role, topic->ns, cmd.subscription());
  if (!allowed.is_ok()) {
    c.send(commands::error(request_id, proto::AuthorizationError, allowed.message()));
    return;
  }
  if (auto room = c.use_tenant(topic->ns.tenant); !room.is_ok()) {
    c.send(commands::error(request_id, proto::NotAllowedError, room.message()));
    return;
  }
  if (c.consumers.count(cmd.consumer_id())) {
    c.send(commands::success(request_id));  // a retry of a SUBSCRIBE that succeeded
    return;
  }
  // A typed consumer registers its schema when the topic has none like it,
  // as Pulsar does; AUTO_CONSUME (and no schema) only reads.
  bool typed = cmd.has_schema() && cmd.schema().type() != proto::Schema::None &&
               cmd.schema().type() != proto::Schema::AutoConsume;
  if (!typed) {
    attach_consumer(c, cmd, *topic);
    return;
  }
  register_schema(c, *topic, cmd.schema(), [cmd, topic = *topic](PulsarConnection& conn, Result<std::string> version) {
    if (!version.is_ok()) {
      const auto& st = version.status();
      conn.send(commands::error(cmd.request_id(),
                                st.code() == common::ErrorCode::kInvalidArgument ? proto::IncompatibleSchema
                                                                                 : server_error(st),
                                st.message()));
      return;
    }
    attach_consumer(conn, cmd, topic);
  });
}

void handle_flow(PulsarConnection& c, const proto::CommandFlow& cmd) {
  uint32_t permits = cmd.messagepermits();
  with_subscription(c, cmd.consumer_id(), [permits](broker::Subscription& s, uint64_t id) { s.flow(id, permits); });
}

// An id with ack_set acknowledges part of a batch entry: the messages whose
// bits are clear (Pulsar's batch-index acknowledgement). A cumulative one
// acknowledges everything before the entry, then those messages.
void handle_ack(PulsarConnection& c, const proto::CommandAck& cmd) {
  std::vector<AckRequest> acks;
  for (const auto& id : cmd.message_id()) {
    AckRequest a;
    a.position = position_of(id);
    a.unacked.assign(id.ack_set().begin(), id.ack_set().end());
    if (id.has_batch_size() && id.batch_size() > 0) a.batch_size = static_cast<uint32_t>(id.batch_size());
    acks.push_back(std::move(a));
  }
  bool cumulative = cmd.ack_type() == proto::CommandAck::Cumulative;
  uint64_t consumer_id = cmd.consumer_id();
  bool wants_answer = cmd.has_request_id();
  uint64_t request_id = cmd.request_id();
  with_subscription(c, consumer_id, [reply = c.replier(), acks = std::move(acks), cumulative, consumer_id,
                                     wants_answer, request_id](broker::Subscription& s, uint64_t id) {
    Status st;
    for (const auto& a : acks) {
      Status one;
      if (a.unacked.empty()) {
        one = cumulative ? s.ack_cumulative(id, a.position) : s.ack(id, a.position);
      } else {
        if (cumulative && a.position.entry > 0) {
          one = s.ack_cumulative(id, ledger::Position{a.position.ledger, a.position.entry - 1});
        }
        if (one.is_ok()) one = s.ack_batch(id, a.position, a.unacked, a.batch_size);
      }
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
    c.detach(it->second);
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
  c.service().broker().with_topic(state.topic, [reply = c.request_replier(), state,
                                                request_id](Result<broker::Topic*> t) {
    Status st = t.is_ok() ? Status::ok() : t.status();
    if (st.is_ok() && (*t)->subscription(state.subscription) != nullptr) {
      // A reader's subscription goes with its last consumer.
      (*t)->remove_consumer(state.subscription, state.broker_id);
      if ((*t)->subscription(state.subscription) != nullptr) st = (*t)->unsubscribe(state.subscription);
    } else if (st.is_ok()) {
      st = (*t)->unsubscribe(state.subscription);
    }
    reply([request_id, st](PulsarConnection& conn) {
      conn.send(st.is_ok() ? commands::success(request_id)
                           : commands::error(request_id, server_error(st), st.message()));
    });
  });
}

namespace {

// GET_LAST_MESSAGE_ID's answer, as Pulsar's broker gives it: the last
// entry with the partition index of the consumer's topic and, for a batch,
// the index of its last message (so that a reader that took part of it
// knows more follow); the subscription's mark-delete position beside it.
proto::BaseCommand last_message_id_response(uint64_t request_id, ledger::Position last, int32_t partition,
                                            uint32_t last_entry_messages,
                                            std::optional<ledger::Position> mark_delete) {
  proto::BaseCommand out;
  out.set_type(proto::BaseCommand::GET_LAST_MESSAGE_ID_RESPONSE);
  auto* r = out.mutable_getlastmessageidresponse();
  r->set_request_id(request_id);
  const int32_t batch_index = last_entry_messages > 1 ? static_cast<int32_t>(last_entry_messages) - 1 : -1;
  *r->mutable_last_message_id() =
      commands::message_id(last.ledger, static_cast<uint64_t>(last.entry), partition, batch_index);
  if (mark_delete) {
    *r->mutable_consumer_mark_delete_position() =
        commands::message_id(mark_delete->ledger, static_cast<uint64_t>(mark_delete->entry));
  }
  return out;
}

}  // namespace

void handle_get_last_message_id(PulsarConnection& c, const proto::CommandGetLastMessageId& cmd) {
  uint64_t request_id = cmd.request_id();
  auto it = c.consumers.find(cmd.consumer_id());
  if (it == c.consumers.end()) {
    c.send(commands::error(request_id, proto::ConsumerNotFound, "no consumer with this id on this connection"));
    return;
  }
  const int32_t partition = it->second.topic.partition;
  c.service().broker().with_topic(it->second.topic, [reply = c.request_replier(), request_id, partition,
                                                     sub = it->second.subscription](Result<broker::Topic*> t) {
    if (!t.is_ok()) {
      reply([request_id, st = t.status()](PulsarConnection& conn) {
        conn.send(commands::error(request_id, topic_load_error(st), st.message()));
      });
      return;
    }
    ledger::Log& log = (*t)->log();
    const ledger::Position last = log.last_confirmed();
    std::optional<ledger::Position> mark_delete;
    if (auto* s = (*t)->subscription(sub)) mark_delete = s->cursor().mark_delete_position();
    auto answer = [reply, request_id, partition, last, mark_delete](uint32_t messages) {
      reply([out = last_message_id_response(request_id, last, partition, messages, mark_delete)](
                PulsarConnection& conn) { conn.send(out); });
    };
    const auto& chain = log.chain();
    if (last.entry < 0 || chain.empty()) return answer(1);
    if (chain.back().id == last.ledger && chain.back().runs_complete() && !chain.back().runs.empty()) {
      return answer(chain.back().runs.back().messages);
    }
    // The message count of the last entry is in its header.
    log.read_entries(ledger::Position{last.ledger, last.entry - 1}, 1,
                     [answer, last](Result<std::vector<ledger::LedgerEntry>> r) {
                       const bool found = r.is_ok() && !r->empty() && r->front().position == last;
                       answer(found ? r->front().header.messages : 1);
                     });
  });
}

void handle_consumer_stats(PulsarConnection& c, const proto::CommandConsumerStats& cmd) {
  uint64_t request_id = cmd.request_id();
  auto it = c.consumers.find(cmd.consumer_id());
  if (it == c.consumers.end()) {
    proto::BaseCommand out;
    out.set_type(proto::BaseCommand::CONSUMER_STATS_RESPONSE);
    auto* r = out.mutable_consumerstatsresponse();
    r->set_request_id(request_id);
    r->set_error_code(proto::ConsumerNotFound);
    r->set_error_message("no consumer with this id on this connection");
    c.send(out);
    return;
  }
  c.service().broker().with_topic(it->second.topic, [reply = c.request_replier(), request_id,
                                                     sub = it->second.subscription,
                                                     broker_id = it->second.broker_id](Result<broker::Topic*> t) {
    proto::BaseCommand out;
    out.set_type(proto::BaseCommand::CONSUMER_STATS_RESPONSE);
    auto* r = out.mutable_consumerstatsresponse();
    r->set_request_id(request_id);
    const broker::SubscriptionStats* found_sub = nullptr;
    const broker::ConsumerStats* found = nullptr;
    broker::TopicStats stats;
    if (t.is_ok()) {
      stats = (*t)->stats_at(broker::RateMeter::Clock::now());
      for (const auto& s : stats.subscriptions) {
        if (s.name != sub) continue;
        found_sub = &s;
        for (const auto& cs : s.consumer_list) {
          if (cs.consumer_id == broker_id) found = &cs;
        }
      }
    }
    if (found == nullptr) {
      r->set_error_code(t.is_ok() ? proto::ConsumerNotFound : server_error(t.status()));
      r->set_error_message(t.is_ok() ? "the consumer is no longer attached" : t.status().message());
    } else {
      r->set_msgrateout(found->msg_rate_out);
      r->set_msgthroughputout(found->byte_rate_out);
      r->set_msgrateredeliver(0);
      r->set_consumername(found->consumer_name);
      r->set_availablepermits(static_cast<uint64_t>(std::max<int64_t>(found->permits, 0)));
      r->set_unackedmessages(found->unacked_messages);
      r->set_blockedconsumeronunackedmsgs(found->blocked_on_unacked);
      r->set_address(found->client.address);
      if (found->client.connected_since_ms > 0) {
        r->set_connectedsince(common::iso8601_utc(found->client.connected_since_ms));
      }
      r->set_type(std::string(broker::subscription_type_name(found_sub->type)));
      r->set_msgrateexpired(0);
      r->set_msgbacklog(found_sub->backlog_messages);
    }
    reply([out = std::move(out)](PulsarConnection& conn) { conn.send(out); });
  });
}

}  // namespace magnetar::protocol::pulsar
