// DescribeProducers: the idempotent producers a partition remembers
// (producer_state.h): id, epoch, last sequence taken and when its last
// batch came (the broker's clock: the state keeps no record timestamps).
// No transactions are served, so CurrentTxnStartTimestamp is -1. The state
// is memory only: after a restart a partition lists none until they write.
#include "protocol/kafka/errors.h"
#include "protocol/kafka/server/partition_calls.h"

namespace magnetar::protocol::kafka {

using common::Result;

namespace {

struct ProducersAnswer {
  ErrorCode error = kNone;
  std::string message;
  std::vector<ProducerSnapshot> producers;
};

}  // namespace

void handle_describe_producers(KafkaConnection& c, const Request& request) {
  std::vector<TopicPartition> partitions;
  for (const Struct& t : request.body.array("Topics")) {
    for (int64_t index : t.ints("PartitionIndexes")) {
      partitions.push_back({t.str("Name"), static_cast<int32_t>(index)});
    }
  }
  PartitionWork<ProducersAnswer> work = [service = &c.service()](size_t, Result<broker::Topic*> t,
                                                                 std::function<void(ProducersAnswer)> answer) {
    if (!t.is_ok()) return answer({error_code(t.status()), t.status().message(), {}});
    // On the partition's home reactor, where its producers' state lives.
    answer({kNone, {}, service->producer_states().producers_of((*t)->name().to_string())});
  };
  auto done = [request, partitions](KafkaConnection& conn, std::vector<ProducersAnswer> answers) {
    Struct resp = request.response();
    resp.set("ThrottleTimeMs", int64_t{0});
    Struct* topic = nullptr;
    for (size_t k = 0; k < answers.size(); ++k) {
      Struct& p = partition_entry(resp, topic, partitions[k]);
      p.set("ErrorCode", int64_t{answers[k].error});
      if (answers[k].error != kNone) p.set("ErrorMessage", answers[k].message);
      for (const ProducerSnapshot& s : answers[k].producers) {
        auto& out = p.add("ActiveProducers");
        out.set("ProducerId", s.producer_id);
        out.set("ProducerEpoch", int64_t{s.epoch});
        out.set("LastSequence", int64_t{s.last_sequence});
        out.set("LastTimestamp", s.last_used_ms);
        out.set("CurrentTxnStartTimestamp", int64_t{-1});
      }
    }
    conn.respond(request, resp);
  };
  on_each_partition<ProducersAnswer>(c, partitions, broker::TopicAction::kLookup, std::move(work), std::move(done));
}

}  // namespace magnetar::protocol::kafka
