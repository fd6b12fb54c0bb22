// Topic: moving a subscription to a message or a point in time (Pulsar's
// SEEK and the REST reset-cursor calls), and where a new reader starts.
#include <cstdint>

#include "broker/topic.h"
#include "ledger/managed_ledger.h"

namespace magnetar::broker {

using common::Status;
using ledger::Position;

Position Topic::reader_start(Position start_after, InitialPosition initial) const {
  // Pulsar's non-durable cursor: past the last entry the initial position
  // decides; before the first entry held, the earliest.
  const auto& chain = log_->chain();
  const Position last = log_->last_confirmed();
  const Position before_first = chain.empty() ? last : Position{chain.ledgers().front().id, storage::kNoEntry};
  if (start_after > last) return initial == InitialPosition::kEarliest ? before_first : last;
  if (start_after < before_first) return before_first;
  return start_after;
}

void Topic::seek_subscription(const std::string& name, Position first, ledger::Callback<Status> done) {
  const auto& chain = log_->chain();
  Position last = log_->last_confirmed();
  Position mark_delete;
  if (chain.empty() || first.ledger < chain.ledgers().front().id) {
    mark_delete = chain.empty() ? last : Position{chain.ledgers().front().id, storage::kNoEntry};
  } else if (first > last) {
    mark_delete = last;
  } else {
    mark_delete = Position{first.ledger, first.entry - 1};
  }
  reset_subscription(name, mark_delete, std::move(done));
}

void Topic::seek_subscription_by_time(const std::string& name, int64_t time_ms, ledger::Callback<Status> done) {
  auto* ml = dynamic_cast<ledger::ManagedLedger*>(log_.get());
  if (ml == nullptr) {
    done(Status::failed_precondition("a non-persistent topic keeps no messages to seek to"));
    return;
  }
  if (subscription(name) == nullptr) {
    done(Status::not_found("Subscription " + name + " not found on " + name_.to_string()));
    return;
  }
  std::weak_ptr<bool> alive = alive_;
  ml->seek_by_time(time_ms, [this, alive, name, done = std::move(done)](common::Result<Position> first) {
    if (alive.expired()) return done(Status::unavailable("the topic was closed meanwhile"));
    Position mark_delete;
    if (first.is_ok()) {
      mark_delete = Position{first->ledger, first->entry - 1};
    } else if (first.status().code() == common::ErrorCode::kNotFound) {
      mark_delete = log_->last_confirmed();  // nothing published since
    } else {
      return done(first.status());
    }
    reset_subscription(name, mark_delete, std::move(done));
  });
}

}  // namespace magnetar::broker
