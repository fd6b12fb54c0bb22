// Topic compaction of a loaded topic: its policies, the automatic trigger,
// and starting a pass (compaction.h).
#include "broker/backlog_quota.h"
#include "broker/compaction.h"
#include "broker/topic.h"
#include "common/clock.h"
#include "common/logging.h"

namespace magnetar::broker {

using common::Status;

namespace {

// Kafka's default delete.retention.ms for a compact topic: one day.
constexpr int64_t kKafkaDeleteRetentionMs = 24 * 60 * 60 * 1000;

// How old a compact,delete topic's view entries may grow: its retention time
// in effect, when that is a time (not forever, not "none past consumption").
std::chrono::milliseconds view_max_age(CleanupPolicy cleanup, const ledger::ManagedLedger& ml) {
  if (cleanup != CleanupPolicy::kCompactDelete || ml.retention_time().count() <= 0) return {};
  return ml.retention_time();
}

}  // namespace

void Topic::apply_compaction_policies(const NamespacePolicies& policies) {
  const bool any = policies.compaction_threshold || policies.cleanup_policy || policies.delete_retention_ms ||
                   policies.min_compaction_lag_ms;
  if (!any && !cold_) return;
  Cold& c = cold();
  c.compaction_threshold = policies.compaction_threshold;
  c.cleanup = policies.cleanup_policy;
  c.delete_retention_ms = policies.delete_retention_ms;
  c.min_compaction_lag_ms = policies.min_compaction_lag_ms;
}

uint64_t Topic::bytes_after_compaction_horizon() const {
  auto* ml = dynamic_cast<const ledger::ManagedLedger*>(log_.get());
  if (ml == nullptr || !ml->compacted()) return log_->chain().total_size();
  return backlog_bytes_after(log_->chain(), ml->compacted()->horizon);
}

void Topic::check_compaction() {
  if (closed_ || !cold_ || context_.compaction_codec == nullptr) return;
  auto* ml = dynamic_cast<ledger::ManagedLedger*>(log_.get());
  if (ml == nullptr || ml->compacting()) return;
  const Cold& c = *cold_;
  const uint64_t dirty = bytes_after_compaction_horizon();
  bool due = false;
  if (c.compaction_threshold && *c.compaction_threshold > 0) {
    due = dirty >= static_cast<uint64_t>(*c.compaction_threshold);
  } else if (!c.compaction_threshold && cleanup_policy() != CleanupPolicy::kDelete) {
    const uint64_t clean = ml->compacted() ? ml->compacted()->size : 0;
    due = dirty >= kMinCompactableBytes && dirty >= clean;
  }
  // A compact,delete view ages: rewritten each half retention time, so an
  // entry leaves it at most half a retention time late.
  const auto max_age = view_max_age(cleanup_policy(), *ml);
  const bool aging = !due && max_age.count() > 0 && ml->compacted() && ml->compacted()->entries > 0 &&
                     common::wall_clock_ms() - ml->compacted()->created_ms >= max_age.count() / 2;
  if (!due && !aging) return;
  Status st = start_compaction();
  if (!st.is_ok()) return;
  if (aging) {
    MLOG_INFO("topic {}: the compacted view is {} ms old, past half the retention time; aging it",
              name_.to_string(), common::wall_clock_ms() - ml->compacted()->created_ms);
  } else {
    MLOG_INFO("topic {}: {} bytes after the compaction horizon, compacting", name_.to_string(), dirty);
  }
}

Status Topic::start_compaction() {
  if (name_.domain != TopicDomain::kPersistent) {
    return Status::failed_precondition("compaction applies to persistent topics only; " + name_.to_string() +
                                       " is not persistent");
  }
  auto* ml = dynamic_cast<ledger::ManagedLedger*>(log_.get());
  if (ml == nullptr || context_.compaction_codec == nullptr || context_.compactions == nullptr) {
    return Status::unimplemented("this broker does not compact topics");
  }
  if (closed_) return Status::unavailable("topic " + name_.to_string() + " is closing");
  const std::string topic = name_.to_string();
  if (ml->compacting() || !context_.compactions->try_start(topic)) {
    return Status::already_exists("Compaction already in progress for " + topic);
  }
  CompactionSettings settings;
  const CleanupPolicy cleanup = cleanup_policy();
  const std::optional<int64_t> delete_retention = cold_ ? cold_->delete_retention_ms : std::nullopt;
  const std::optional<int64_t> min_lag = cold_ ? cold_->min_compaction_lag_ms : std::nullopt;
  settings.delete_retention = std::chrono::milliseconds(
      delete_retention.value_or(cleanup == CleanupPolicy::kDelete ? 0 : kKafkaDeleteRetentionMs));
  settings.min_lag = std::chrono::milliseconds(min_lag.value_or(0));
  settings.drop_covered = cleanup != CleanupPolicy::kDelete;
  settings.max_age = view_max_age(cleanup, *ml);
  settings.max_read_bytes_per_second = context_.compaction_max_read_bytes_per_second;
  CompactionBoard* board = context_.compactions;
  run_compaction(ml->shared_from_this(), *context_.compaction_codec, settings, liveness(),
                 [board, topic](common::Result<CompactionOutcome> outcome) {
                   if (outcome) {
                     MLOG_INFO("topic {}: compaction {} in {} ms: read {} bytes, wrote {} bytes, {} live keys; "
                               "{} bytes before, {} after",
                               topic, outcome->nothing_to_do ? "had nothing to do" : "done", outcome->duration_ms,
                               outcome->bytes_read, outcome->bytes_written, outcome->keys, outcome->bytes_before,
                               outcome->bytes_after);
                   } else {
                     MLOG_WARN("topic {}: compaction failed: {}", topic, outcome.status().to_string());
                   }
                   board->finish(topic, outcome);
                 });
  return Status::ok();
}

}  // namespace magnetar::broker
