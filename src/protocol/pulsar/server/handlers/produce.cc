// PRODUCER, SEND, CLOSE_PRODUCER: publishing onto a topic's log.
#include <fmt/format.h>

#include "broker/publish_stages.h"
#include "common/stage_timing.h"
#include "protocol/pulsar/batch.h"
#include "protocol/pulsar/commands.h"
#include "protocol/pulsar/server/pulsar_connection.h"

namespace magnetar::protocol::pulsar {

using common::Result;

namespace {

broker::ProducerAccessMode access_mode(const proto::CommandProducer& cmd) {
  switch (cmd.producer_access_mode()) {
    case proto::Exclusive: return broker::ProducerAccessMode::kExclusive;
    case proto::WaitForExclusive: return broker::ProducerAccessMode::kWaitForExclusive;
    case proto::ExclusiveWithFencing: return broker::ProducerAccessMode::kExclusiveWithFencing;
    default: return broker::ProducerAccessMode::kShared;
  }
}

// The wire error for a refused producer or send: a backlog quota has its
// own two errors, the rest maps as everywhere else.
proto::ServerError producer_error(const common::Status& st, broker::QuotaBlock block) {
  if (st.code() == common::ErrorCode::kResourceExhausted) {
    if (block == broker::QuotaBlock::kHold) return proto::ProducerBlockedQuotaExceededError;
    if (block == broker::QuotaBlock::kException) return proto::ProducerBlockedQuotaExceededException;
  }
  return server_error(st);
}

// A refused PRODUCER: besides producer_error, a producer count limit (the
// topic's or the tenant's) is ProducerBusy, as Pulsar answers it.
proto::ServerError producer_refusal(const common::Status& st, broker::QuotaBlock block) {
  if (st.code() == common::ErrorCode::kLimitReached) return proto::ProducerBusy;
  return producer_error(st, block);
}

proto::BaseCommand producer_success(uint64_t request_id, const std::string& name,
                                    const broker::ProducerAdmission& a, bool ready,
                                    const std::string& schema_version) {
  auto cmd = commands::producer_success(request_id, name, a.last_sequence_id, schema_version);
  cmd.mutable_producer_success()->set_topic_epoch(a.topic_epoch);
  cmd.mutable_producer_success()->set_producer_ready(ready);
  return cmd;
}

void admit_producer(PulsarConnection& c, const proto::CommandProducer& cmd, const broker::TopicName& topic,
                    std::string schema_version);

}  // namespace

void handle_producer(PulsarConnection& c, const proto::CommandProducer& cmd) {
  uint64_t request_id = cmd.request_id();
  auto topic = broker::TopicName::parse(cmd.topic());
  if (!topic) {
    c.send(commands::error(request_id, proto::InvalidTopicName, topic.status().message()));
    return;
  }
  if (auto allowed = c.service().authorization().check(c.role, *topic, broker::TopicAction::kProduce);
      !allowed.is_ok()) {
    c.send(commands::error(request_id, proto::AuthorizationError, allowed.message()));
    return;
  }
  if (auto room = c.use_tenant(topic->ns.tenant); !room.is_ok()) {
    c.send(commands::error(request_id, proto::NotAllowedError, room.message()));
    return;
  }
  if (auto it = c.producers.find(cmd.producer_id()); it != c.producers.end()) {
    // A retry of a PRODUCER already under way or done: answer it again.
    if (it->second.ready) {
      c.send(producer_success(request_id, it->second.name, it->second.admission, true, it->second.schema_version));
    }
    return;
  }
  if (cmd.has_schema()) {
    // Its schema's version first (registered when new), then the producer.
    register_schema(c, *topic, cmd.schema(),
                    [cmd, topic = *topic](PulsarConnection& conn, Result<std::string> version) {
                      if (!version.is_ok()) {
                        const auto& st = version.status();
                        conn.send(commands::error(cmd.request_id(),
                                                  st.code() == common::ErrorCode::kInvalidArgument
                                                      ? proto::IncompatibleSchema
                                                      : server_error(st),
                                                  st.message()));
                        return;
                      }
                      admit_producer(conn, cmd, topic, *version);
                    });
    return;
  }
  admit_producer(c, cmd, *topic, "");
}

namespace {

void admit_producer(PulsarConnection& c, const proto::CommandProducer& cmd, const broker::TopicName& topic_name,
                    std::string schema_version) {
  const broker::TopicName* topic = &topic_name;
  uint64_t request_id = cmd.request_id();
  if (c.producers.count(cmd.producer_id())) return;  // a retry overtook the schema registration
  uint64_t broker_id = c.service().next_id();
  std::string name = cmd.has_producer_name() && !cmd.producer_name().empty()
                         ? cmd.producer_name()
                         : fmt::format("{}-{}", c.service().options().cluster_name, broker_id);
  uint64_t client_id = cmd.producer_id();
  // Registered now so that a CLOSE_PRODUCER or a dropped connection while
  // the broker answers still removes it from the topic.
  c.producers[client_id] = {*topic,          broker_id, name, false, {}, schema_version,
                            c.service().broker().publish_limits(*topic)};
  broker::ProducerOptions options;
  options.id = broker_id;
  options.name = name;
  options.access_mode = access_mode(cmd);
  options.client = c.client_info();
  options.on_closed = [reply = c.replier(), client_id, broker_id](const common::Status&) {
    reply([client_id, broker_id](PulsarConnection& conn) {
      auto it = conn.producers.find(client_id);
      if (it == conn.producers.end() || it->second.broker_id != broker_id) return;
      conn.producers.erase(it);
      // Tells the client to reconnect (and look the topic up again).
      proto::BaseCommand close;
      close.set_type(proto::BaseCommand::CLOSE_PRODUCER);
      close.mutable_close_producer()->set_producer_id(client_id);
      close.mutable_close_producer()->set_request_id(0);
      conn.send(close);
    });
  };
  auto forget = [client_id, broker_id](PulsarConnection& conn) {
    auto it = conn.producers.find(client_id);
    if (it != conn.producers.end() && it->second.broker_id == broker_id) conn.producers.erase(it);
  };
  c.service().broker().with_topic(*topic, [reply = c.request_replier(), broker_id, client_id, request_id, name,
                                           schema_version, options = std::move(options),
                                           forget](Result<broker::Topic*> t) mutable {
    if (!t.is_ok()) {
      reply([forget, request_id, st = t.status()](PulsarConnection& conn) {
        forget(conn);
        conn.send(commands::error(request_id, topic_load_error(st), st.message()));
      });
      return;
    }
    broker::Topic* topic = *t;
    auto waiting = [reply, request_id, name, schema_version]() {
      reply([request_id, name, schema_version](PulsarConnection& conn) {
        conn.send(producer_success(request_id, name, broker::ProducerAdmission{}, false, schema_version));
      });
    };
    topic->add_producer(
        std::move(options), waiting,
        [topic, reply, forget, broker_id, client_id, request_id, name,
         schema_version](Result<broker::ProducerAdmission> r) {
          proto::ServerError code = r.is_ok() ? proto::UnknownError : producer_refusal(r.status(), topic->quota_block());
          reply([r = std::move(r), code, forget, broker_id, client_id, request_id, name,
                 schema_version](PulsarConnection& conn) {
            if (!r.is_ok()) {
              forget(conn);
              conn.send(commands::error(request_id, code, r.status().message()));
              return;
            }
            auto it = conn.producers.find(client_id);
            if (it == conn.producers.end() || it->second.broker_id != broker_id) return;  // closed meanwhile
            it->second.ready = true;
            it->second.admission = *r;
            conn.send(producer_success(request_id, name, *r, true, schema_version));
          });
        });
  });
}

}  // namespace

void handle_send(PulsarConnection& c, Frame& frame) {
  const auto& send = frame.command.send();
  auto it = c.producers.find(send.producer_id());
  if (it == c.producers.end()) {
    c.send(commands::send_error(send.producer_id(), send.sequence_id(), proto::NotAllowedError,
                                "no producer with this id on this connection"));
    return;
  }
  ledger::MessageHeader header;
  header.publish_time_ms = static_cast<int64_t>(frame.metadata.publish_time());
  header.sequence_id = static_cast<int64_t>(send.sequence_id());
  header.messages = frame.metadata.has_num_messages_in_batch()
                        ? static_cast<uint32_t>(frame.metadata.num_messages_in_batch())
                        : static_cast<uint32_t>(std::max(1, send.num_messages()));
  const auto& md = frame.metadata;
  if (md.has_ordering_key() && !md.ordering_key().empty()) {
    header.key = md.ordering_key();
  } else if (md.has_partition_key()) {
    header.key = md.partition_key();
  } else if (md.has_num_messages_in_batch() && md.compression() == proto::NONE) {
    // A batch without a key of its own is ordered by its first message's.
    BatchMessage first;
    if (BatchReader(frame.payload, md.num_messages_in_batch()).next(&first)) {
      const auto& one = first.metadata;
      header.key = !one.ordering_key().empty() ? one.ordering_key() : one.partition_key();
    }
  }
  if (md.has_deliver_at_time()) header.deliver_at_ms = md.deliver_at_time();
  // Every chunk of a chunked message carries the message's sequence id:
  // deduplication judges the message by its last chunk, as Pulsar's does.
  header.more_chunks = md.has_uuid() && md.num_chunks_from_msg() > 1 && md.chunk_id() < md.num_chunks_from_msg() - 1;
  uint64_t producer_id = send.producer_id();
  uint64_t sequence_id = send.sequence_id();
  uint64_t highest = send.highest_sequence_id();
  uint64_t broker_id = it->second.broker_id;
  if (!it->second.ready) {
    c.send(commands::send_error(producer_id, sequence_id, proto::NotAllowedError, "the producer is not ready yet"));
    return;
  }
  const size_t bytes = frame.entry.size();
  if (it->second.limits) c.charge_publish(*it->second.limits, header.messages, static_cast<int64_t>(bytes));
  // Counted until its receipt or error is sent: every path below answers.
  c.publish_started(bytes);
  broker::PublishStages::Marks marks;
  marks.received_ns = common::monotonic_ns();
  // The entry (checksum, metadata, payload) is stored as it came off the wire.
  c.service().broker().with_topic(
      it->second.topic, [reply = c.replier(), broker_id, producer_id, sequence_id, highest, bytes, marks,
                         header = std::move(header), entry = std::move(frame.entry)](Result<broker::Topic*> t) mutable {
        if (!t.is_ok()) {
          reply([producer_id, sequence_id, bytes, st = t.status()](PulsarConnection& conn) {
            conn.publish_finished(bytes);
            conn.send(commands::send_error(producer_id, sequence_id, server_error(st), st.message()));
          });
          return;
        }
        broker::Topic* topic = *t;
        int64_t highest_id = highest > sequence_id ? static_cast<int64_t>(highest) : -1;
        marks.at_topic_ns = common::monotonic_ns();
        topic->publish(
            broker_id, std::move(header), std::move(entry),
            [topic, reply, producer_id, sequence_id, highest, bytes, marks](Result<ledger::Position> r) mutable {
              marks.take_add_timing();
              proto::ServerError code = proto::PersistenceError;
              if (!r.is_ok() && r.status().code() == common::ErrorCode::kResourceExhausted) {
                code = producer_error(r.status(), topic->quota_block());
              }
              reply([producer_id, sequence_id, highest, bytes, code, marks, r = std::move(r)](PulsarConnection& conn) {
                conn.publish_finished(bytes);
                if (!r.is_ok()) {
                  conn.send(commands::send_error(producer_id, sequence_id, code, r.status().message()));
                  return;
                }
                // A duplicate is answered with (-1, -1), as Pulsar does.
                auto id = commands::message_id(r->ledger, static_cast<uint64_t>(r->entry));
                conn.send(commands::send_receipt(producer_id, sequence_id, id, highest));
                broker::PublishStages::of(broker::PublishProtocol::kPulsar).record(marks);
              });
            },
            highest_id);
      });
}

void handle_close_producer(PulsarConnection& c, const proto::CommandCloseProducer& cmd) {
  auto it = c.producers.find(cmd.producer_id());
  if (it == c.producers.end()) {
    c.send(commands::success(cmd.request_id()));
    return;
  }
  // Answered once the topic has let the producer go, so that a producer the
  // client opens next (an exclusive one, say) does not meet this one.
  const uint64_t request_id = cmd.request_id();
  c.service().broker().with_topic(it->second.topic, [broker_id = it->second.broker_id, request_id,
                                                     reply = c.request_replier()](Result<broker::Topic*> t) {
    if (t.is_ok()) (*t)->remove_producer(broker_id);
    reply([request_id](PulsarConnection& conn) { conn.send(commands::success(request_id)); });
  });
  c.producers.erase(it);
}

}  // namespace magnetar::protocol::pulsar
