#include "ledger/non_persistent_log.h"

namespace magnetar::ledger {

using common::Result;
using common::Slice;
using common::Status;

NonPersistentLog::NonPersistentLog(std::string name, size_t max_entries, size_t max_bytes)
    : name_(std::move(name)), max_entries_(max_entries), max_bytes_(max_bytes), home_(runtime::Reactor::current()) {
  chain_.append(ChainLedger{kLedgerId, 0, 0, 0, 0, {}, 0});
}

void NonPersistentLog::later(runtime::Task fn) {
  if (home_ != nullptr && home_->try_post(fn).is_ok()) return;
  if (fn) fn();
}

void NonPersistentLog::add_entry(MessageHeader header, Slice payload, Callback<Result<AppendedEntry>> done) {
  if (closed_) return later([done]() { done(Status::failed_precondition("log is closed")); });
  const int64_t first_index = next_index_;
  header.first_index = next_index_;
  next_index_ += header.messages;
  ChainLedger& ledger = chain_.back();
  const Position p{kLedgerId, ledger.entries};
  ++ledger.entries;
  ledger.size += payload.size();
  ledger.record_entry(header.messages);
  bytes_ += payload.size();
  ring_.push_back(LedgerEntry{p, std::move(header), std::move(payload)});
  evict();
  later([done, p, first_index]() { done(AppendedEntry{p, first_index}); });
}

void NonPersistentLog::evict() {
  bool evicted = false;
  while (!ring_.empty() && (ring_.size() > max_entries_ || bytes_ > max_bytes_)) {
    bytes_ -= ring_.front().payload.size();
    ring_.pop_front();
    ++first_held_;
    evicted = true;
  }
  if (!evicted) return;
  // Entries gone from the ring count as consumed by everyone behind them.
  const Position gone{kLedgerId, first_held_ - 1};
  for (auto& [name, cursor] : cursors_) {
    if (cursor.mark_delete_position() < gone) (void)cursor.ack_cumulative(gone, chain_);
  }
}

void NonPersistentLog::read_entries(Position after, size_t max_entries, Callback<Result<std::vector<LedgerEntry>>> done) {
  std::vector<LedgerEntry> out;
  EntryId start = after.ledger < kLedgerId ? 0 : after.entry + 1;
  if (after.ledger > kLedgerId) start = chain_.back().entries;
  start = std::max(start, first_held_);
  for (EntryId e = start; e < chain_.back().entries && out.size() < max_entries; ++e) {
    out.push_back(ring_[static_cast<size_t>(e - first_held_)]);
  }
  later([done, out = std::move(out)]() mutable { done(std::move(out)); });
}

void NonPersistentLog::open_cursor(std::string name, bool durable, CursorStart start,
                                   Callback<Result<Cursor*>> done) {
  auto it = cursors_.find(name);
  if (it == cursors_.end()) {
    // Nothing is ever persisted here, whatever `durable` asks.
    Position at = start == CursorStart::kEarliest ? Position{kLedgerId, first_held_ - 1} : last_confirmed();
    it = cursors_.emplace(name, Cursor(name, at, false)).first;
  }
  Cursor* c = &it->second;
  later([done, c]() { done(c); });
}

Cursor* NonPersistentLog::cursor(const std::string& name) {
  auto it = cursors_.find(name);
  return it == cursors_.end() ? nullptr : &it->second;
}

Status NonPersistentLog::ack(const std::string& cursor, Position p) {
  Cursor* c = this->cursor(cursor);
  if (c == nullptr) return Status::not_found("no cursor " + cursor);
  if (p.ledger == kLedgerId && p.entry < first_held_) return Status::ok();  // already gone
  return c->ack(p, chain_);
}

Status NonPersistentLog::ack_cumulative(const std::string& cursor, Position p) {
  Cursor* c = this->cursor(cursor);
  if (c == nullptr) return Status::not_found("no cursor " + cursor);
  return c->ack_cumulative(p, chain_);
}

Status NonPersistentLog::ack_batch_index(const std::string& cursor, Position p, uint32_t index, uint32_t batch_size) {
  Cursor* c = this->cursor(cursor);
  if (c == nullptr) return Status::not_found("no cursor " + cursor);
  if (p.ledger == kLedgerId && p.entry < first_held_) return Status::ok();
  return c->ack_batch_index(p, index, batch_size, chain_);
}

void NonPersistentLog::close(Callback<Status> done) {
  closed_ = true;
  later([done]() { done(Status::ok()); });
}

void NonPersistentLog::reset_cursor(const std::string& name, Position mark_delete, Callback<Status> done) {
  auto it = cursors_.find(name);
  if (it == cursors_.end()) return later([done, name]() { done(Status::not_found("no cursor " + name)); });
  it->second.reset(mark_delete);
  later([done]() { done(Status::ok()); });
}

void NonPersistentLog::delete_cursor(const std::string& name, Callback<Status> done) {
  const bool erased = cursors_.erase(name) > 0;
  later([done, erased, name]() { done(erased ? Status::ok() : Status::not_found("no cursor " + name)); });
}

std::vector<std::string> NonPersistentLog::cursor_names() const {
  std::vector<std::string> out;
  for (const auto& [name, c] : cursors_) out.push_back(name);
  return out;
}

}  // namespace magnetar::ledger
