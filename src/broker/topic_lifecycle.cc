#include "broker/topic_lifecycle.h"

#include <memory>

namespace magnetar::broker {

using common::Result;
using common::Status;

namespace {

using Done = std::function<void(Status)>;

// Deletes one non-partitioned topic (or one partition) that has a log:
// loads it, deletes it, then drops its overrides on the tenancy thread.
// `missing_ok`: a partition never written to has nothing to delete.
void delete_one(BrokerService& broker, Tenancy& tenancy, const TopicName& topic, bool force, bool missing_ok,
                Done done) {
  const bool known = tenancy.require_topic(topic).is_ok();
  broker.with_existing_topic(topic, known, [&broker, &tenancy, topic, force, missing_ok, done](Result<Topic*> t) {
    auto finish = [&tenancy, topic, done](Status st) {
      Status submitted = tenancy.submit([&tenancy, topic, done, st]() {
        if (!st.is_ok()) return done(st);
        done(tenancy.delete_topic_policies(topic));
      });
      if (!submitted.is_ok()) done(submitted);
    };
    if (!t.is_ok()) {
      if (missing_ok && t.status().code() == common::ErrorCode::kNotFound) return finish(Status::ok());
      return finish(t.status());
    }
    broker.delete_topic(topic, force, finish);
  });
}

// Deletes partitions [next, count) one after another, then the metadata.
void delete_partitions_from(BrokerService& broker, Tenancy& tenancy, const TopicName& topic, int32_t next,
                            int32_t count, bool force, Done done) {
  if (next == count) return done(tenancy.delete_partitioned_topic(topic));
  delete_one(broker, tenancy, topic.partition_of(next), force, /*missing_ok=*/true,
             [&broker, &tenancy, topic, next, count, force, done](Status st) {
               if (!st.is_ok()) return done(st);
               delete_partitions_from(broker, tenancy, topic, next + 1, count, force, done);
             });
}

}  // namespace

void delete_topic_with_data(BrokerService& broker, Tenancy& tenancy, const TopicName& topic, bool force,
                            std::function<void(Status)> done) {
  auto partitions = tenancy.get_partitions(topic);
  if (!partitions.is_ok()) return done(partitions.status());
  if (*partitions > 0) return delete_partitions_from(broker, tenancy, topic, 0, *partitions, force, std::move(done));
  delete_one(broker, tenancy, topic, force, /*missing_ok=*/false, std::move(done));
}

}  // namespace magnetar::broker
