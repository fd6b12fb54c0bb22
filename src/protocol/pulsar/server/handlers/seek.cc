// SEEK: moves a consumer's subscription to a message id or a publish time.
// As in Pulsar, the subscription's consumers are detached (CLOSE_CONSUMER)
// and reconnect to read from the new position; the seek itself is answered
// with SUCCESS once the cursor has moved. An id inside a batch carries an
// ack_set (bit set = a message delivered again), as Pulsar's Java client
// sends it: the batch is delivered with the others marked acknowledged.
#include <limits>
#include <vector>

#include "protocol/pulsar/commands.h"
#include "protocol/pulsar/server/pulsar_connection.h"

namespace magnetar::protocol::pulsar {

using common::Result;
using common::Status;

void handle_seek(PulsarConnection& c, const proto::CommandSeek& cmd) {
  uint64_t request_id = cmd.request_id();
  auto it = c.consumers.find(cmd.consumer_id());
  if (it == c.consumers.end()) {
    c.send(commands::error(request_id, proto::ConsumerNotFound, "no consumer with this id on this connection"));
    return;
  }
  if (!cmd.has_message_id() && !cmd.has_message_publish_time()) {
    c.send(commands::error(request_id, proto::MetadataError, "SEEK needs a message id or a publish time"));
    return;
  }
  std::optional<ledger::Position> to;
  std::vector<uint64_t> unacked;
  if (cmd.has_message_id()) {
    for (int64_t word : cmd.message_id().ack_set()) unacked.push_back(static_cast<uint64_t>(word));
    // Pulsar's MessageId.earliest is (-1, -1) on the unsigned wire field:
    // anything before the log's start is the earliest for the broker.
    // MessageId.latest, (INT64_MAX, INT64_MAX), is past the end as it is.
    const auto& id = cmd.message_id();
    to = id.ledgerid() == std::numeric_limits<uint64_t>::max()
             ? ledger::Position{0, 0}
             : ledger::Position{id.ledgerid(), static_cast<storage::EntryId>(id.entryid())};
  }
  auto time_ms = static_cast<int64_t>(cmd.message_publish_time());
  c.service().broker().with_topic(
      it->second.topic, [reply = c.request_replier(), sub = it->second.subscription, to, unacked = std::move(unacked),
                         time_ms, request_id](Result<broker::Topic*> t) mutable {
        auto answer = [reply, request_id](Status st) {
          reply([st, request_id](PulsarConnection& conn) {
            conn.send(st.is_ok() ? commands::success(request_id)
                                 : commands::error(request_id, server_error(st), st.message()));
          });
        };
        if (!t.is_ok()) return answer(t.status());
        if (to) {
          (*t)->seek_subscription(sub, *to, answer, std::move(unacked));
        } else {
          (*t)->seek_subscription_by_time(sub, time_ms, answer);
        }
      });
}

}  // namespace magnetar::protocol::pulsar
