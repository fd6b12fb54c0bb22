// Whole-topic deletion shared by every front door (REST, Kafka's
// DeleteTopics): a topic goes with its data, its subscriptions and its
// policy overrides, so a topic re-created under the same name starts empty.
//
// Threads: call on the tenancy thread (it reads metadata); `done` runs on
// the tenancy thread or on a topic's home reactor.
#pragma once

#include <functional>

#include "broker/broker_service.h"
#include "broker/naming.h"
#include "broker/tenancy.h"

namespace magnetar::broker {

// Deletes `topic`: a partitioned topic's partitions (each one that has a
// log, loaded or not) and then its partition metadata; a non-partitioned
// topic's log and its overrides. Without `force`, a partition or topic with
// producers or consumers stops the deletion with kFailedPrecondition (the
// partitions deleted before it stay deleted, as in Pulsar). kNotFound when
// the topic does not exist.
void delete_topic_with_data(BrokerService& broker, Tenancy& tenancy, const TopicName& topic, bool force,
                            std::function<void(common::Status)> done);

}  // namespace magnetar::broker
