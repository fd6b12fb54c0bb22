// InitProducerId: hands an idempotent producer a new id at epoch 0, also
// when the request names the id and epoch it had (v3+, KIP-360: a producer
// resetting after an error). Kafka's coordinator does the same for a
// producer without a transactional id: only a transactional id keeps its
// producer id and bumps its epoch. The id is made from the clock, so it is
// not handed out again after a restart (producer_state.h). Transactions are
// not served: a transactional id is answered
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients report as
// "transactions are not available to you" instead of retrying forever.
#include "common/clock.h"
#include "protocol/kafka/server/kafka_connection.h"

namespace magnetar::protocol::kafka {

void handle_init_producer_id(KafkaConnection& c, const Request& request) {
  Struct resp = request.response();
  resp.set("ThrottleTimeMs", int64_t{0});
  if (!request.body.is_null("TransactionalId")) {
    resp.set("ErrorCode", int64_t{kTransactionalIdAuthorizationFailed});
    resp.set("ProducerId", int64_t{-1});
    resp.set("ProducerEpoch", int64_t{-1});
    return c.respond(request, resp);
  }
  resp.set("ErrorCode", int64_t{kNone});
  resp.set("ProducerId", c.service().producer_ids().next(common::wall_clock_ms()));
  resp.set("ProducerEpoch", int64_t{0});
  c.respond(request, resp);
}

}  // namespace magnetar::protocol::kafka
