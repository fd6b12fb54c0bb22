// InitProducerId: hands an idempotent producer its id (epoch 0). The id is
// made from the clock, so it is not handed out again after a restart
// (producer_state.h). Transactions are not served: a transactional id is
// answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients report as
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
  const int64_t known = request.body.i("ProducerId");
  const int64_t epoch = request.body.i("ProducerEpoch");
  resp.set("ErrorCode", int64_t{kNone});
  if (known >= 0 && epoch >= 0 && epoch < INT16_MAX) {
    // A producer resuming after an error (v3+): same id, next epoch.
    resp.set("ProducerId", known);
    resp.set("ProducerEpoch", epoch + 1);
  } else {
    resp.set("ProducerId", c.service().producer_ids().next(common::wall_clock_ms()));
    resp.set("ProducerEpoch", int64_t{0});
  }
  c.respond(request, resp);
}

}  // namespace magnetar::protocol::kafka
