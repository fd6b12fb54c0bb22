// A consumer group's offsets on a partition another cluster member owns.
//
// A group's committed offsets are cursors on its partitions (group_offsets.h),
// and only a partition's owner holds its cursors, while the group's
// coordinator may be any member. The coordinator therefore asks the owner,
// over the cluster port (broker::RemoteCalls, method kKafkaGroupOffset).
//
// The call, in one place for both sides (big endian):
//   u8 op (1 commit, 2 fetch) | i64 offset | i32 partition |
//   u16 length + namespace ("tenant/ns") | u16 length + topic | u16 length + group
// The reply: i16 Kafka error code | i64 the entry-aligned offset (-1: none).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "broker/naming.h"
#include "protocol/kafka/errors.h"

namespace magnetar::broker {
class RemoteCalls;
}

namespace magnetar::protocol::kafka {

class KafkaService;

enum class OffsetOp : uint8_t { kCommit = 1, kFetch = 2 };

// Runs `op` for `group` on partition `partition` of Kafka topic `topic` at
// the member that owns it. `done` may run on any thread: kNotLeaderOrFollower
// when that member cannot be asked or does not own it either.
void remote_group_offset(KafkaService& service, const broker::NamespaceName& ns, const std::string& topic,
                         int32_t partition, const std::string& group, OffsetOp op, int64_t offset,
                         std::function<void(ErrorCode, int64_t aligned)> done);

// Answers other members' calls: registered by a cluster member's KafkaService.
void serve_remote_group_offsets(KafkaService& service, broker::RemoteCalls& calls);

}  // namespace magnetar::protocol::kafka
