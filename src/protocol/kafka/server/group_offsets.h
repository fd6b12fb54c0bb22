// Committed offsets of a consumer group, kept as the cursor of the durable
// subscription named after the group on each topic (partition).
//
// The rule: committing offset o acknowledges every entry whose messages are
// all below o, so the mark-delete position is the entry before the one
// holding o (o past the end: the last entry). A batch entry is acknowledged
// only when the whole batch is below o; the records of a batch before o are
// remembered by the coordinator (GroupCoordinator::remember_offset), and
// after a restart the group resumes at that batch's first offset.
// Reading back: the offset of the first message after the mark-delete
// position (the high watermark when none is).
//
// Threads: on the topic's home reactor; `done` runs there too.
#pragma once

#include <functional>
#include <string>

#include "broker/topic.h"
#include "protocol/kafka/errors.h"

namespace magnetar::protocol::kafka {

// Moves (creating it when missing) subscription `group` to committed offset
// `offset`; reports the entry-aligned offset the cursor now stands for.
void commit_group_offset(broker::Topic* topic, const std::string& group, int64_t offset,
                         std::function<void(ErrorCode, int64_t aligned)> done);
// The entry-aligned committed offset of subscription `group`, -1 when the
// topic has no such subscription.
void fetch_group_offset(broker::Topic* topic, const std::string& group,
                        std::function<void(ErrorCode, int64_t aligned)> done);

}  // namespace magnetar::protocol::kafka
