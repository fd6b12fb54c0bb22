// TopicContext: what the topics of one reactor share. The BrokerService
// keeps one per reactor and each loaded topic holds a pointer to it, not a
// copy of each callback and setting, so that a loaded idle topic stays
// small (docs/benchmarks.md, "Many idle topics").
//
// Every member may be empty or null: a topic then runs on the broker's
// defaults (no policies, no tenant limits, no deduplication, no tracing).
// Threads: the callbacks may be called from any reactor; the context
// outlives its topics.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "broker/naming.h"
#include "broker/policies.h"
#include "broker/publish_limiter.h"
#include "broker/retention.h"
#include "common/result.h"
#include "metadata/store.h"

namespace magnetar::broker {

class LeaseGate;
class Topic;
class CompactionBoard;
class CompactionCodec;

class TraceRecorder;

struct TopicContext {
  // Whether a new durable subscription may be made (the tenant's
  // subscription count); `done` may run on any thread.
  using SubscriptionAdmitter =
      std::function<void(const TopicName&, const std::string& subscription, std::function<void(common::Status)>)>;

  // Where deduplication snapshots go; without it deduplication stays off.
  metadata::Store* store = nullptr;
  // Where trace events go when a namespace turns tracing on (the reactor's own).
  TraceRecorder* trace_recorder = nullptr;
  // How the storage keeps entries, for the persisted event of a trace
  // (BrokerOptions::storage_durability).
  const std::string* storage_durability = nullptr;
  // The node's retention defaults (retention.h): with them, applying a
  // topic's policies sets its log's retention, TTL and fsync mode.
  const RetentionDefaults* retention_defaults = nullptr;
  // A topic's effective policies (its own over its namespace's).
  std::function<std::optional<NamespacePolicies>(const TopicName&)> policies;
  // A tenant's limits, read when a producer, consumer or subscription arrives.
  std::function<std::shared_ptr<const TenantLimits>(const std::string& tenant)> tenant_limits;
  SubscriptionAdmitter admit_subscription;
  // A topic's publish rate limits (publish_limiter.h): made on first use
  // and kept while someone holds them.
  std::function<std::shared_ptr<PublishLimits>(const TopicName&)> publish_limits;
  // A cluster member's: publishes are acknowledged only while its lease is
  // current (lease_gate.h). Null on a standalone node.
  LeaseGate* lease_gate = nullptr;
  // Topic compaction (compaction.h): how entries' messages are read, and
  // where passes report. Without a codec, topics are not compacted.
  const CompactionCodec* compaction_codec = nullptr;
  CompactionBoard* compactions = nullptr;
  int64_t compaction_max_read_bytes_per_second = 0;  // 0: no limit

  // Called with a persistent topic's effective policies each time they are
  // applied (at load and on every refresh), on its home reactor: where
  // geo-replication starts and stops the topic's replicators.
  std::function<void(Topic&, const NamespacePolicies&)> on_policies;
  // Called once, on its home reactor, when another node took a topic's log
  // over (its ledger was fenced: the bundle moved while this node still
  // served it). The broker closes the topic here, so that its clients look
  // it up again; a topic cannot close itself from inside its own callbacks.
  std::function<void(const TopicName&)> log_taken_over;

  // The context of topics made without one: every member empty.
  static const TopicContext& none() {
    static const TopicContext empty;
    return empty;
  }
};

}  // namespace magnetar::broker
