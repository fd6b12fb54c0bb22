// OffsetForLeaderEpoch: a partition's log has one leader epoch here, 0 from
// its first offset (Metadata names epoch 0 for every partition), so the end
// offset of epoch 0 is the high watermark, as Kafka answers for the
// latest epoch of a log. An epoch the log never had (below 0, or above the
// current one) is answered with epoch -1 and offset -1, as Kafka does. A
// CurrentLeaderEpoch above 0 is UNKNOWN_LEADER_EPOCH (the client knows a
// newer leader than this one); -1 skips the check.
#include "protocol/kafka/errors.h"
#include "protocol/kafka/server/offsets.h"
#include "protocol/kafka/server/partition_calls.h"

namespace magnetar::protocol::kafka {

using common::Result;

namespace {

constexpr int64_t kLeaderEpoch = 0;
constexpr int64_t kNoEpoch = -1;

struct EpochEnd {
  ErrorCode error = kNone;
  int64_t epoch = kNoEpoch;
  int64_t end_offset = -1;
};

}  // namespace

void handle_offset_for_leader_epoch(KafkaConnection& c, const Request& request) {
  std::vector<TopicPartition> partitions;
  std::vector<std::pair<int64_t, int64_t>> epochs;  // (current leader epoch, epoch asked)
  for (const Struct& t : request.body.array("Topics")) {
    for (const Struct& p : t.array("Partitions")) {
      partitions.push_back({t.str("Topic"), static_cast<int32_t>(p.i("Partition"))});
      epochs.emplace_back(p.i("CurrentLeaderEpoch"), p.i("LeaderEpoch"));
    }
  }
  PartitionWork<EpochEnd> work = [epochs](size_t k, Result<broker::Topic*> t, std::function<void(EpochEnd)> answer) {
    if (!t.is_ok()) return answer({error_code(t.status())});
    const auto [current, asked] = epochs[k];
    if (current > kLeaderEpoch) return answer({kUnknownLeaderEpoch});
    if (current >= 0 && current < kLeaderEpoch) return answer({kFencedLeaderEpoch});
    if (asked != kLeaderEpoch) return answer({kNone});
    answer({kNone, kLeaderEpoch, high_watermark((*t)->log())});
  };
  auto done = [request, partitions](KafkaConnection& conn, std::vector<EpochEnd> answers) {
    Struct resp = request.response();
    resp.set("ThrottleTimeMs", int64_t{0});
    Struct* topic = nullptr;
    for (size_t k = 0; k < answers.size(); ++k) {
      if (topic == nullptr || topic->str("Topic") != partitions[k].topic) {
        topic = &resp.add("Topics");
        topic->set("Topic", partitions[k].topic);
      }
      auto& p = topic->add("Partitions");
      p.set("ErrorCode", int64_t{answers[k].error});
      p.set("Partition", int64_t{partitions[k].partition});
      p.set("LeaderEpoch", answers[k].epoch);
      p.set("EndOffset", answers[k].end_offset);
    }
    conn.respond(request, resp);
  };
  on_each_partition<EpochEnd>(c, partitions, broker::TopicAction::kConsume, std::move(work), std::move(done));
}

}  // namespace magnetar::protocol::kafka
