// Retention of the managed ledger: the housekeeping pass, trimming the
// ledgers no cursor needs and retention no longer holds, and dropping a
// prefix on request (delete_before).
#include <algorithm>

#include "common/logging.h"
#include "ledger/managed_ledger.h"

namespace magnetar::ledger {

using common::Result;
using common::Status;

void ManagedLedger::trim(Callback<Status> done) {
  check_home();
  // A compaction pass reads the log twice: it stays whole until the pass ends.
  if (compacting_.active) return later([done]() { done(Status::ok()); });
  const auto& ledgers = chain_.ledgers();
  std::optional<Position> slowest;
  for (const auto& [name, slot] : cursors_) {
    if (!slot.cursor.durable()) continue;
    Position md = slot.cursor.mark_delete_position();
    if (!slowest || md < *slowest) slowest = md;
  }
  const int64_t now = now_ms();
  size_t removable = 0;
  uint64_t newer_size = chain_.total_size();
  for (size_t i = 0; i + 1 < ledgers.size(); ++i) {
    const ChainLedger& l = ledgers[i];
    newer_size -= l.size;
    const bool consumed = l.entries == 0 || !slowest || Position{l.id, l.entries - 1} <= *slowest;
    if (!consumed) break;
    const int64_t age = now - ledgers[i + 1].created_ms;  // about when it was sealed
    const bool past_time = config_.retention_time.count() >= 0 && age >= config_.retention_time.count();
    const bool past_size = config_.retention_size >= 0 && newer_size >= static_cast<uint64_t>(config_.retention_size);
    if (!past_time && !past_size) break;
    removable = i + 1;
  }
  if (removable == 0) return later([done]() { done(Status::ok()); });
  drop_front_ledgers(removable, std::move(done));
}

void ManagedLedger::delete_before(int64_t index, Callback<Result<int64_t>> done) {
  check_home();
  const auto& ledgers = chain_.ledgers();
  // A closed ledger ends where the next one starts; the current one is
  // never dropped.
  size_t removable = 0;
  while (removable + 1 < ledgers.size() && ledgers[removable + 1].first_index <= index) ++removable;
  auto self = shared_from_this();
  auto answer = [self, done](Status st) {
    if (!st.is_ok()) return done(st);
    const auto& left = self->chain_.ledgers();
    done(Result<int64_t>(left.empty() ? self->next_index_ : left.front().first_index));
  };
  if (removable == 0) return later([answer]() { answer(Status::ok()); });
  drop_front_ledgers(removable, std::move(answer));
}

void ManagedLedger::drop_front_ledgers(size_t count, Callback<Status> done) {
  const auto& ledgers = chain_.ledgers();
  LedgerChain before = chain_;
  std::vector<LedgerId> removed;
  for (size_t i = 0; i < count; ++i) removed.push_back(ledgers[i].id);
  chain_.drop_front(count);
  auto self = shared_from_this();
  persist_chain([self, done, before, removed](Status st) {
    if (!st.is_ok()) {
      self->chain_ = before;
      return done(st);
    }
    for (auto& [name, slot] : self->cursors_) slot.cursor.skip_removed_ledgers(self->chain_);
    for (LedgerId id : removed) {
      if (self->cold_ && self->cold_->observer.removed) self->cold_->observer.removed(id);
      self->storage_.delete_ledger(id, [self, id](Status del) {
        if (!del.is_ok()) MLOG_WARN("managed ledger {}: ledger {} not deleted: {}", self->name_, id, del.to_string());
      });
    }
    MLOG_INFO("managed ledger {}: dropped {} ledgers", self->name_, removed.size());
    done(Status::ok());
  });
}

void ManagedLedger::maintain(Callback<Status> done) {
  check_home();
  maybe_roll_over();
  auto self = shared_from_this();
  expire_messages([self, done](Status st) {
    if (!st.is_ok()) return done(st);
    self->trim(done);
  });
}

}  // namespace magnetar::ledger
