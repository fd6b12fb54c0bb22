// DeleteRecords: moves a partition's log start towards the offset asked
// (-1: the high watermark), whatever consumers and retention say, as Kafka
// does. The managed ledger deletes whole ledgers only, and never the one
// being written (ManagedLedger::delete_before): the closed ledgers whose
// records all lie below the offset go, and the answer's LowWatermark is
// where the log starts afterwards, which may be below the offset asked (the
// records from there on stay readable). Subscriptions (groups' committed
// offsets too) behind the deleted ledgers move to the new start. An offset
// past the high watermark is OFFSET_OUT_OF_RANGE. Tenant admins only.
#include "ledger/managed_ledger.h"
#include "protocol/kafka/errors.h"
#include "protocol/kafka/server/offsets.h"
#include "protocol/kafka/server/partition_calls.h"

namespace magnetar::protocol::kafka {

using common::Result;

namespace {

constexpr int64_t kToHighWatermark = -1;

struct Deleted {
  ErrorCode error = kNone;
  int64_t low_watermark = -1;
};

// On the partition's home reactor.
void delete_prefix(broker::Topic* topic, int64_t offset, std::function<void(Deleted)> answer) {
  ledger::Log& log = topic->log();
  const int64_t end = high_watermark(log);
  if (offset == kToHighWatermark) offset = end;
  if (offset < 0 || offset > end) return answer({kOffsetOutOfRange, log_start_offset(log)});
  auto* managed = dynamic_cast<ledger::ManagedLedger*>(&log);
  if (managed == nullptr) return answer({kNone, log_start_offset(log)});  // nothing stored to delete
  managed->delete_before(offset, [answer](Result<int64_t> start) {
    if (!start.is_ok()) return answer({error_code(start.status()), -1});
    answer({kNone, *start});
  });
}

}  // namespace

void handle_delete_records(KafkaConnection& c, const Request& request) {
  std::vector<TopicPartition> partitions;
  std::vector<int64_t> offsets;
  for (const Struct& t : request.body.array("Topics")) {
    for (const Struct& p : t.array("Partitions")) {
      partitions.push_back({t.str("Name"), static_cast<int32_t>(p.i("PartitionIndex"))});
      offsets.push_back(p.i("Offset"));
    }
  }
  const bool allowed = may_administer(c).is_ok();
  PartitionWork<Deleted> work = [allowed, offsets](size_t k, Result<broker::Topic*> t,
                                                   std::function<void(Deleted)> answer) {
    if (!allowed) return answer({kTopicAuthorizationFailed, -1});
    if (!t.is_ok()) return answer({error_code(t.status()), -1});
    delete_prefix(*t, offsets[k], std::move(answer));
  };
  auto done = [request, partitions](KafkaConnection& conn, std::vector<Deleted> answers) {
    Struct resp = request.response();
    resp.set("ThrottleTimeMs", int64_t{0});
    Struct* topic = nullptr;
    for (size_t k = 0; k < answers.size(); ++k) {
      Struct& p = partition_entry(resp, topic, partitions[k]);
      p.set("LowWatermark", answers[k].low_watermark);
      p.set("ErrorCode", int64_t{answers[k].error});
    }
    conn.respond(request, resp);
  };
  on_each_partition<Deleted>(c, partitions, broker::TopicAction::kProduce, std::move(work), std::move(done));
}

}  // namespace magnetar::protocol::kafka
