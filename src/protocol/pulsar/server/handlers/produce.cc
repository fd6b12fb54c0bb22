// PRODUCER, SEND, CLOSE_PRODUCER: publishing onto a topic's log.
#include <fmt/format.h>

#include "protocol/pulsar/batch.h"
#include "protocol/pulsar/commands.h"
#include "protocol/pulsar/server/pulsar_connection.h"

namespace magnetar::protocol::pulsar {

using common::Result;

void handle_producer(PulsarConnection& c, const proto::CommandProducer& cmd) {
  uint64_t request_id = cmd.request_id();
  auto topic = broker::TopicName::parse(cmd.topic());
  if (!topic) {
    c.send(commands::error(request_id, proto::InvalidTopicName, topic.status().message()));
    return;
  }
  if (c.producers.count(cmd.producer_id())) {
    // A retry of a PRODUCER that already succeeded: answer it again.
    c.send(commands::producer_success(request_id, c.producers[cmd.producer_id()].name));
    return;
  }
  uint64_t broker_id = c.service().next_id();
  std::string name = cmd.has_producer_name() && !cmd.producer_name().empty()
                         ? cmd.producer_name()
                         : fmt::format("{}-{}", c.service().options().cluster_name, broker_id);
  uint64_t client_id = cmd.producer_id();
  c.service().broker().with_topic(*topic, [reply = c.replier(), topic = *topic, broker_id, client_id, request_id, name](Result<broker::Topic*> t) {
    common::Status st = t.is_ok() ? (*t)->add_producer(broker_id, name) : t.status();
    reply([st, topic, broker_id, client_id, request_id, name](PulsarConnection& conn) {
      if (!st.is_ok()) {
        conn.send(commands::error(request_id, server_error(st), st.message()));
        return;
      }
      conn.producers[client_id] = {topic, broker_id, name};
      conn.send(commands::producer_success(request_id, name));
    });
  });
}

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
  } else if (md.num_messages_in_batch() > 0 && md.compression() == proto::NONE) {
    // A batch without a key of its own is ordered by its first message's.
    BatchMessage first;
    if (BatchReader(frame.payload, md.num_messages_in_batch()).next(&first)) {
      const auto& one = first.metadata;
      header.key = !one.ordering_key().empty() ? one.ordering_key() : one.partition_key();
    }
  }
  if (md.has_deliver_at_time()) header.deliver_at_ms = md.deliver_at_time();
  uint64_t producer_id = send.producer_id();
  uint64_t sequence_id = send.sequence_id();
  uint64_t highest = send.highest_sequence_id();
  uint64_t broker_id = it->second.broker_id;
  // The entry (checksum, metadata, payload) is stored as it came off the wire.
  c.service().broker().with_topic(
      it->second.topic, [reply = c.replier(), broker_id, producer_id, sequence_id, highest, header = std::move(header),
                         entry = std::move(frame.entry)](Result<broker::Topic*> t) mutable {
        if (!t.is_ok()) {
          reply([producer_id, sequence_id, st = t.status()](PulsarConnection& conn) {
            conn.send(commands::send_error(producer_id, sequence_id, server_error(st), st.message()));
          });
          return;
        }
        (*t)->publish(broker_id, std::move(header), std::move(entry),
                      [reply, producer_id, sequence_id, highest](Result<ledger::Position> r) {
                        reply([producer_id, sequence_id, highest, r = std::move(r)](PulsarConnection& conn) {
                          if (!r.is_ok()) {
                            conn.send(commands::send_error(producer_id, sequence_id, proto::PersistenceError,
                                                           r.status().message()));
                            return;
                          }
                          auto id = commands::message_id(r->ledger, static_cast<uint64_t>(r->entry));
                          conn.send(commands::send_receipt(producer_id, sequence_id, id, highest));
                        });
                      });
      });
}

void handle_close_producer(PulsarConnection& c, const proto::CommandCloseProducer& cmd) {
  auto it = c.producers.find(cmd.producer_id());
  if (it != c.producers.end()) {
    c.service().broker().with_topic(it->second.topic, [broker_id = it->second.broker_id](Result<broker::Topic*> t) {
      if (t.is_ok()) (*t)->remove_producer(broker_id);
    });
    c.producers.erase(it);
  }
  c.send(commands::success(cmd.request_id()));
}

}  // namespace magnetar::protocol::pulsar
