// Cursors of the managed ledger: opening, acknowledging, persisting and
// recovering them, reset and delete.
#include "common/join.h"
#include "common/logging.h"
#include "ledger/managed_ledger.h"

namespace magnetar::ledger {

using common::Result;
using common::Status;

void ManagedLedger::open_cursor(std::string name, bool durable, CursorStart start,
                                Callback<Result<Cursor*>> done) {
  check_home();
  auto it = cursors_.find(name);
  if (it != cursors_.end()) return later([done, c = &it->second.cursor]() { done(c); });
  // Before the first entry of the oldest ledger held, or after the last.
  auto start_position = [this, start]() {
    if (start == CursorStart::kEarliest && !chain_.empty()) return before_first();
    return last_confirmed();
  };
  if (!durable) {
    auto [slot, _] = cursors_.emplace(name, CursorSlot{Cursor(name, start_position(), false)});
    return later([done, c = &slot->second.cursor]() { done(c); });
  }
  auto self = shared_from_this();
  store_.get(cursor_key(name), [self, name, done, start_position](Result<metadata::Record> rec) {
    auto existing = self->cursors_.find(name);
    if (existing != self->cursors_.end()) return done(&existing->second.cursor);
    if (rec) {
      auto cursor = Cursor::decode(name, rec->value);
      if (!cursor) return done(cursor.status());
      CursorSlot slot{std::move(cursor.value())};
      slot.version = rec->stat.version;
      slot.cursor.skip_removed_ledgers(self->chain_);
      auto [it2, _] = self->cursors_.emplace(name, std::move(slot));
      return done(&it2->second.cursor);
    }
    if (rec.status().code() != common::ErrorCode::kNotFound) return done(rec.status());
    auto [it2, _] = self->cursors_.emplace(name, CursorSlot{Cursor(name, start_position(), true)});
    self->persist_cursor(name);
    done(&it2->second.cursor);
  });
}

Cursor* ManagedLedger::cursor(const std::string& name) {
  auto it = cursors_.find(name);
  return it == cursors_.end() ? nullptr : &it->second.cursor;
}

void ManagedLedger::persist_cursor(const std::string& name) {
  auto it = cursors_.find(name);
  if (it == cursors_.end() || !it->second.cursor.durable()) return;
  CursorSlot& slot = it->second;
  slot.dirty = true;
  if (slot.writing) return;  // the write in flight is followed by one more
  slot.writing = true;
  slot.dirty = false;
  auto self = shared_from_this();
  store_.put(cursor_key(name), slot.cursor.encode(), metadata::PutOptions{slot.version, 0},
             [self, name](Result<metadata::Stat> st) {
               auto it = self->cursors_.find(name);
               if (it == self->cursors_.end()) return;
               CursorSlot& slot = it->second;
               slot.writing = false;
               Status result;
               if (!st) {
                 MLOG_WARN("managed ledger {}: cursor {} not persisted: {}", self->name_, name,
                           st.status().to_string());
                 result = st.status();
               } else {
                 slot.version = st->version;
                 if (slot.dirty) return self->persist_cursor(name);
               }
               auto waiters = std::move(slot.flushed);
               slot.flushed.clear();
               for (auto& w : waiters) w(result);
             });
}

void ManagedLedger::flush_cursors(Callback<Status> done) {
  check_home();
  auto join = common::Join::start(std::move(done));
  for (auto& [name, slot] : cursors_) {
    if (!slot.writing) continue;  // a dirty slot is always writing too
    slot.flushed.push_back(join->branch());
  }
  later([join]() { join->release(); });
}

Status ManagedLedger::ack(const std::string& cursor, Position p) {
  check_home();
  auto it = cursors_.find(cursor);
  if (it == cursors_.end()) return Status::not_found("no cursor " + cursor);
  MAGNETAR_RETURN_IF_ERROR(it->second.cursor.ack(p, chain_));
  persist_cursor(cursor);
  return Status::ok();
}

Status ManagedLedger::ack_cumulative(const std::string& cursor, Position p) {
  check_home();
  auto it = cursors_.find(cursor);
  if (it == cursors_.end()) return Status::not_found("no cursor " + cursor);
  MAGNETAR_RETURN_IF_ERROR(it->second.cursor.ack_cumulative(p, chain_));
  persist_cursor(cursor);
  return Status::ok();
}

Status ManagedLedger::ack_batch_index(const std::string& cursor, Position p, uint32_t index, uint32_t batch_size) {
  check_home();
  auto it = cursors_.find(cursor);
  if (it == cursors_.end()) return Status::not_found("no cursor " + cursor);
  MAGNETAR_RETURN_IF_ERROR(it->second.cursor.ack_batch_index(p, index, batch_size, chain_));
  persist_cursor(cursor);
  return Status::ok();
}

Status ManagedLedger::set_replicated(const std::string& name, bool on) {
  check_home();
  auto it = cursors_.find(name);
  if (it == cursors_.end()) return Status::not_found("no cursor " + name);
  if (!it->second.cursor.durable()) return Status::invalid_argument("a reader's cursor is not replicated");
  if (it->second.cursor.replicated() == on) return Status::ok();
  it->second.cursor.set_replicated(on);
  persist_cursor(name);
  return Status::ok();
}

void ManagedLedger::when_persisted(const std::string& name, Callback<Status> done) {
  auto it = cursors_.find(name);
  if (it == cursors_.end() || !it->second.writing) return later([done]() { done(Status::ok()); });
  it->second.flushed.push_back(std::move(done));
}

void ManagedLedger::reset_cursor(const std::string& name, Position mark_delete, Callback<Status> done) {
  check_home();
  auto it = cursors_.find(name);
  if (it == cursors_.end()) return later([done, name]() { done(Status::not_found("no cursor " + name)); });
  it->second.cursor.reset(mark_delete);
  persist_cursor(name);
  when_persisted(name, std::move(done));
}

void ManagedLedger::delete_cursor(const std::string& name, Callback<Status> done) {
  check_home();
  auto it = cursors_.find(name);
  if (it == cursors_.end()) return later([done, name]() { done(Status::not_found("no cursor " + name)); });
  const bool durable = it->second.cursor.durable();
  auto waiters = std::move(it->second.flushed);
  cursors_.erase(it);  // a write still in flight finds no slot and stops there
  for (auto& w : waiters) w(Status::ok());
  if (!durable) return later([done]() { done(Status::ok()); });
  // Metadata writes apply in order, so this follows any write in flight.
  store_.del(cursor_key(name), metadata::kAnyVersion, [done](Status st) {
    done(st.code() == common::ErrorCode::kNotFound ? Status::ok() : st);
  });
}

std::vector<std::string> ManagedLedger::cursor_names() const {
  std::vector<std::string> out;
  for (const auto& [name, slot] : cursors_) out.push_back(name);
  return out;
}

void ManagedLedger::recover_cursors(Callback<Status> done) {
  auto self = shared_from_this();
  store_.list_children(chain_key() + "/cursors", [self, done](Result<std::vector<std::string>> names) {
    if (!names) return done(names.status());
    auto join = common::Join::start(done, [](const Status& st) { return st.code() == common::ErrorCode::kNotFound; });
    for (const std::string& name : *names) {
      self->store_.get(self->cursor_key(name), [self, name, release = join->branch()](Result<metadata::Record> rec) {
        if (!rec) return release(rec.status());
        auto cursor = Cursor::decode(name, rec->value);
        if (!cursor) return release(cursor.status());
        CursorSlot slot{std::move(cursor.value())};
        slot.version = rec->stat.version;
        slot.cursor.skip_removed_ledgers(self->chain_);
        self->cursors_.emplace(name, std::move(slot));
        release(Status::ok());
      });
    }
    join->release();
  });
}

}  // namespace magnetar::ledger
