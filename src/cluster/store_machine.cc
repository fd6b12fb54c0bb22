#include "cluster/store_machine.h"

#include <cstdlib>
#include <utility>

#include "common/logging.h"

namespace magnetar::cluster {

using common::Status;

StoreMachine::StoreMachine(std::string path, leveldb::Env* env)
    : state_(metadata::StoreState::Options{std::move(path), /*sync_writes=*/false, env}) {}

Status StoreMachine::open() {
  MAGNETAR_RETURN_IF_ERROR(state_.open());
  auto top = state_.read_children("/");
  Status st = top.is_ok() ? Status::ok() : top.status();
  if (st.is_ok() && !top->empty()) {
    st = Status::failed_precondition(
        "the replicated metadata database is not empty: a member replays its log from an empty state");
  }
  if (!st.is_ok()) state_.close();
  return st;
}

void StoreMachine::apply(LogIndex index, std::string_view command) {
  auto op = metadata::decode_write_op(command);
  if (op.is_ok() && op->kind == metadata::WriteOp::Kind::kImport) {
    Outcome outcome;
    Status restored = restore(op->value);
    outcome.result = restored.is_ok() ? common::Result<metadata::Stat>(metadata::Stat{})
                                      : common::Result<metadata::Stat>(restored);
    if (in_flight_ > 0) outcomes_.insert_or_assign(index, std::move(outcome));
    return;
  }
  Outcome outcome = state_.apply(command);
  Status committed = state_.commit();
  if (!committed.is_ok()) {
    MLOG_ERROR("metadata: cannot apply log entry {}: {}; stopping rather than diverge from the cluster", index,
               committed.to_string());
    std::abort();
  }
  watchers_.notify(outcome.events);
  if (in_flight_ > 0) {
    outcome.events.clear();  // delivered above; the proposer needs the answer only
    outcomes_.insert_or_assign(index, std::move(outcome));
  }
}

std::optional<StoreMachine::Outcome> StoreMachine::end_proposal(std::optional<LogIndex> index) {
  std::optional<Outcome> outcome;
  if (index) {
    auto it = outcomes_.find(*index);
    if (it != outcomes_.end()) outcome = std::move(it->second);
    // Callbacks come in log order: an earlier outcome still here has no taker.
    outcomes_.erase(outcomes_.begin(), outcomes_.upper_bound(*index));
  }
  if (in_flight_ > 0) in_flight_--;
  if (in_flight_ == 0) outcomes_.clear();
  return outcome;
}

std::string StoreMachine::snapshot() {
  auto bytes = state_.snapshot();
  if (!bytes.is_ok()) {
    MLOG_ERROR("metadata: cannot read the state for a snapshot: {}; stopping", bytes.status().to_string());
    std::abort();
  }
  snapshots_taken_++;
  return std::move(*bytes);
}

Status StoreMachine::restore(std::string_view bytes) {
  auto events = state_.restore(bytes);
  if (events.is_ok()) snapshots_restored_++;
  if (!events.is_ok()) {
    if (events.status().code() == common::ErrorCode::kCorruption) return events.status();
    MLOG_ERROR("metadata: cannot restore a snapshot: {}; stopping", events.status().to_string());
    std::abort();
  }
  watchers_.notify(*events);
  return Status::ok();
}

}  // namespace magnetar::cluster
