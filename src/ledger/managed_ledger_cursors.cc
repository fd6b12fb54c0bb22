// Cursors, retention, TTL and seeks of the managed ledger.
#include <algorithm>

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
    if (start == CursorStart::kEarliest && !chain_.empty()) return Position{chain_.ledgers().front().id, storage::kNoEntry};
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
  struct Pending {
    size_t left = 1;  // one for this call, released below
    Status first_error;
    Callback<Status> done;
  };
  auto pending = std::make_shared<Pending>();
  pending->done = std::move(done);
  auto release = [pending](Status st) {
    if (!st.is_ok() && pending->first_error.is_ok()) pending->first_error = st;
    if (--pending->left == 0) pending->done(pending->first_error);
  };
  for (auto& [name, slot] : cursors_) {
    if (!slot.writing) continue;  // a dirty slot is always writing too
    ++pending->left;
    slot.flushed.push_back(release);
  }
  later([release]() { release(Status::ok()); });
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

void ManagedLedger::trim(Callback<Status> done) {
  check_home();
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
  LedgerChain before = chain_;
  std::vector<LedgerId> removed;
  for (size_t i = 0; i < removable; ++i) removed.push_back(ledgers[i].id);
  chain_.drop_front(removable);
  auto self = shared_from_this();
  persist_chain([self, done, before, removed](Status st) {
    if (!st.is_ok()) {
      self->chain_ = before;
      return done(st);
    }
    for (auto& [name, slot] : self->cursors_) slot.cursor.skip_removed_ledgers(self->chain_);
    for (LedgerId id : removed) {
      if (self->observer_.removed) self->observer_.removed(id);
      self->storage_.delete_ledger(id, [self, id](Status del) {
        if (!del.is_ok()) MLOG_WARN("managed ledger {}: ledger {} not deleted: {}", self->name_, id, del.to_string());
      });
    }
    MLOG_INFO("managed ledger {}: trimmed {} ledgers", self->name_, removed.size());
    done(Status::ok());
  });
}

Position ManagedLedger::position_of(uint64_t ordinal) const {
  for (const ChainLedger& l : chain_.ledgers()) {
    if (ordinal < static_cast<uint64_t>(l.entries)) return Position{l.id, static_cast<EntryId>(ordinal)};
    ordinal -= static_cast<uint64_t>(l.entries);
  }
  return Position{};
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

uint64_t ManagedLedger::ordinal_of(Position p) const {
  uint64_t ordinal = 0;
  for (const ChainLedger& l : chain_.ledgers()) {
    if (l.id == p.ledger) return ordinal + static_cast<uint64_t>(p.entry);
    ordinal += static_cast<uint64_t>(l.entries);
  }
  return ordinal;
}

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
      if (self->observer_.expired) self->observer_.expired(name, was, last_expired);
      MLOG_DEBUG("managed ledger {}: cursor {} expired messages up to {}", self->name_, name,
                 last_expired.to_string());
      self->persist_cursor(name);
    }
    done(Status::ok());
  });
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
    struct Pending {
      size_t left;
      Status first_error;
    };
    auto pending = std::make_shared<Pending>(Pending{names->size() + 1, Status::ok()});
    auto release = [pending, done](Status st) {
      if (!st.is_ok() && pending->first_error.is_ok()) pending->first_error = st;
      if (--pending->left == 0) done(pending->first_error);
    };
    for (const std::string& name : *names) {
      self->store_.get(self->cursor_key(name), [self, name, release](Result<metadata::Record> rec) {
        if (!rec) return release(rec.status().code() == common::ErrorCode::kNotFound ? Status::ok() : rec.status());
        auto cursor = Cursor::decode(name, rec->value);
        if (!cursor) return release(cursor.status());
        CursorSlot slot{std::move(cursor.value())};
        slot.version = rec->stat.version;
        slot.cursor.skip_removed_ledgers(self->chain_);
        self->cursors_.emplace(name, std::move(slot));
        release(Status::ok());
      });
    }
    release(Status::ok());
  });
}

void ManagedLedger::delete_log(Callback<Status> done) {
  check_home();
  state_ = State::kClosed;
  fail_waiting(Status::failed_precondition("managed ledger is deleted"));
  auto self = shared_from_this();
  std::vector<std::string> names = cursor_names();
  for (auto& [name, slot] : cursors_) {
    auto waiters = std::move(slot.flushed);
    for (auto& w : waiters) w(Status::ok());
  }
  cursors_.clear();
  struct Pending {
    size_t left;
    Status first_error;
  };
  auto pending = std::make_shared<Pending>(Pending{names.size() + 1, Status::ok()});
  auto delete_chain = [self, done]() {
    self->store_.del(self->chain_key(), metadata::kAnyVersion, [self, done](Status st) {
      if (!st.is_ok() && st.code() != common::ErrorCode::kNotFound) return done(st);
      if (self->writer_.ledger != 0) self->storage_.close_ledger(self->writer_.ledger, [](Result<EntryId>) {});
      for (const ChainLedger& l : self->chain_.ledgers()) {
        self->storage_.delete_ledger(l.id, [self, id = l.id](Status del) {
          if (!del.is_ok() && del.code() != common::ErrorCode::kNotFound) {
            MLOG_WARN("managed ledger {}: ledger {} not deleted: {}", self->name_, id, del.to_string());
          }
        });
      }
      self->chain_ = LedgerChain();
      MLOG_INFO("managed ledger {}: deleted", self->name_);
      done(Status::ok());
    });
  };
  auto release = [pending, delete_chain, done](Status st) {
    if (!st.is_ok() && st.code() != common::ErrorCode::kNotFound && pending->first_error.is_ok()) {
      pending->first_error = st;
    }
    if (--pending->left > 0) return;
    if (!pending->first_error.is_ok()) return done(pending->first_error);
    delete_chain();
  };
  for (const std::string& name : names) store_.del(cursor_key(name), metadata::kAnyVersion, release);
  release(Status::ok());
}

void ManagedLedger::seek(std::function<bool(const MessageHeader&)> at_or_after, Callback<Result<Position>> done) {
  check_home();
  // Lower bound over entry ordinals, one entry read per probe.
  struct Search {
    uint64_t lo;
    uint64_t hi;
  };
  auto search = std::make_shared<Search>(Search{0, chain_.total_entries()});
  auto self = shared_from_this();
  auto step = std::make_shared<std::function<void()>>();
  *step = [self, search, at_or_after, done, step]() {
    if (search->lo >= search->hi) {
      // Resetting *step destroys this lambda's captures: keep what is needed.
      auto answer = done;
      const bool past_end = search->lo >= self->chain_.total_entries();
      const Position found = past_end ? Position{} : self->position_of(search->lo);
      *step = nullptr;
      if (past_end) return answer(Status::not_found("past the end of the log"));
      return answer(found);
    }
    const uint64_t mid = search->lo + (search->hi - search->lo) / 2;
    const Position p = self->position_of(mid);
    self->storage_.read_entries(p.ledger, p.entry, p.entry,
                                [search, at_or_after, done, step, mid](Result<std::vector<storage::Entry>> r) {
                                  // A damaged probe counts as before the target: the answer is
                                  // off by that one entry at most, which readers skip anyway.
                                  if (!r && r.status().code() == common::ErrorCode::kCorruption) {
                                    search->lo = mid + 1;
                                    return (*step)();
                                  }
                                  if (!r) {
                                    *step = nullptr;
                                    return done(r.status());
                                  }
                                  auto decoded = decode_entry(r->front().data);
                                  if (!decoded) {
                                    search->lo = mid + 1;
                                    return (*step)();
                                  }
                                  if (at_or_after(decoded->first)) {
                                    search->hi = mid;
                                  } else {
                                    search->lo = mid + 1;
                                  }
                                  (*step)();
                                });
  };
  later([step]() { (*step)(); });
}

void ManagedLedger::seek_by_index(int64_t index, Callback<Result<Position>> done) {
  seek([index](const MessageHeader& h) { return h.first_index + static_cast<int64_t>(h.messages) > index; },
       std::move(done));
}

void ManagedLedger::seek_by_time(int64_t time_ms, Callback<Result<Position>> done) {
  seek([time_ms](const MessageHeader& h) { return h.publish_time_ms >= time_ms; }, std::move(done));
}

}  // namespace magnetar::ledger
