// Message TTL and expiry of the managed ledger: acknowledging, for cursors
// behind it, what was published before a point in time.
#include "common/logging.h"
#include "ledger/managed_ledger.h"

namespace magnetar::ledger {

using common::Result;
using common::Status;

void ManagedLedger::expire_messages(Callback<Status> done) {
  check_home();
  if (config_.ttl.count() <= 0) return later([done]() { done(Status::ok()); });
  expire_before(now_ms() - config_.ttl.count(), [](const std::string&) { return true; }, std::move(done));
}

void ManagedLedger::expire_cursor(const std::string& name, int64_t before_ms, Callback<Status> done) {
  check_home();
  if (cursors_.count(name) == 0) return later([done, name]() { done(Status::not_found("no cursor " + name)); });
  auto self = shared_from_this();
  expire_before(before_ms, [name](const std::string& c) { return c == name; }, [self, name, done](Status st) {
    if (!st.is_ok()) return done(st);
    self->when_persisted(name, done);
  });
}

void ManagedLedger::expire_before(int64_t before_ms, std::function<bool(const std::string&)> pick,
                                  Callback<Status> done) {
  if (chain_.total_entries() == 0) return later([done]() { done(Status::ok()); });
  auto self = shared_from_this();
  seek_by_time(before_ms, [self, pick, done](Result<Position> first_live) {
    // Everything before the first entry young enough to live has expired.
    Position last_expired;
    if (first_live) {
      uint64_t ordinal = self->ordinal_of(*first_live);
      if (ordinal == 0) return done(Status::ok());
      last_expired = self->position_of(ordinal - 1);
    } else if (first_live.status().code() == common::ErrorCode::kNotFound) {
      last_expired = self->chain_.last_position();
    } else {
      return done(first_live.status());
    }
    for (auto& [name, slot] : self->cursors_) {
      if (!pick(name) || slot.cursor.mark_delete_position() >= last_expired) continue;
      Position was = slot.cursor.mark_delete_position();
      Status st = slot.cursor.ack_cumulative(last_expired, self->chain_);
      if (!st.is_ok()) return done(st);
      if (self->cold_ && self->cold_->observer.expired) self->cold_->observer.expired(name, was, last_expired);
      MLOG_DEBUG("managed ledger {}: cursor {} expired messages up to {}", self->name_, name,
                 last_expired.to_string());
      self->persist_cursor(name);
    }
    done(Status::ok());
  });
}

}  // namespace magnetar::ledger
