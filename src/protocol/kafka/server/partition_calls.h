// One answer per (topic, partition) of a request, each worked out on the
// partition's home reactor and gathered on the connection's reactor: the
// shape of the admin APIs that act on partitions (DeleteRecords,
// OffsetForLeaderEpoch, DescribeProducers, OffsetDelete).
//
// `work` runs with the partition's place in the list and its topic, or with
// why it cannot be had:
// kWrongNode on a cluster member that does not own it (answered
// NOT_LEADER_OR_FOLLOWER, as Produce does), kNotFound, kPermissionDenied.
// It calls its `answer` exactly once, from any thread. `done` runs on the
// connection's reactor with the answers in the order asked (not at all when
// the connection closed meanwhile). Missing topics are never created.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "protocol/kafka/server/kafka_connection.h"

namespace magnetar::protocol::kafka {

struct TopicPartition {
  std::string topic;
  int32_t partition = 0;
};

// The response's entry for partition `p`, under a "Topics" entry for its
// topic, made when `p` starts a new topic (a topic's partitions come
// together, as asked). `topic` carries the current topic entry from one
// call to the next; start it at null.
inline Struct& partition_entry(Struct& resp, Struct*& topic, const TopicPartition& p) {
  if (topic == nullptr || topic->str("Name") != p.topic) {
    topic = &resp.add("Topics");
    topic->set("Name", p.topic);
  }
  Struct& out = topic->add("Partitions");
  out.set("PartitionIndex", int64_t{p.partition});
  return out;
}

template <typename Answer>
using PartitionWork =
    std::function<void(size_t index, common::Result<broker::Topic*>, std::function<void(Answer)> answer)>;

template <typename Answer>
void on_each_partition(KafkaConnection& c, std::vector<TopicPartition> partitions, broker::TopicAction action,
                       PartitionWork<Answer> work,
                       std::function<void(KafkaConnection&, std::vector<Answer>)> done) {
  struct Gather {
    std::vector<Answer> answers;
    size_t left = 0;
    std::function<void(KafkaConnection&, std::vector<Answer>)> done;
    void one(KafkaConnection& conn) {
      if (--left == 0) done(conn, std::move(answers));
    }
  };
  auto gather = std::make_shared<Gather>();
  gather->answers.resize(partitions.size());
  gather->left = partitions.size() + 1;
  gather->done = std::move(done);
  for (size_t k = 0; k < partitions.size(); ++k) {
    const TopicPartition& p = partitions[k];
    c.with_partition(
        p.topic, p.partition, action,
        [reply = c.replier(), gather, k, work](common::Result<broker::Topic*> t) {
          work(k, std::move(t), [reply, gather, k](Answer a) {
            reply([gather, k, a = std::move(a)](KafkaConnection& conn) mutable {
              gather->answers[k] = std::move(a);
              gather->one(conn);
            });
          });
        },
        /*create=*/false);
  }
  gather->one(c);
}

}  // namespace magnetar::protocol::kafka
