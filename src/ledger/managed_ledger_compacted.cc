// Topic compaction in the managed ledger: writing a compacted ledger,
// installing it as the log's compacted view, and reading the log through
// that view. Which messages survive is decided above (broker/compaction.h).
#include <algorithm>

#include "common/clock.h"
#include "common/logging.h"
#include "ledger/managed_ledger.h"

namespace magnetar::ledger {

using common::Result;
using common::Slice;
using common::Status;

namespace {

// Hints kept for sequential compacted reads (read_compacted).
constexpr size_t kMaxCompactedHints = 64;

// A lower bound over a compacted ledger's entries, one single-entry read per
// probe. Holds itself alive through the reads it has in flight.
class CompactedSearch : public std::enable_shared_from_this<CompactedSearch> {
 public:
  CompactedSearch(storage::Storage& storage, LedgerId ledger, EntryId entries,
                  std::function<bool(const MessageHeader&)> at_or_after, Callback<Result<EntryId>> done)
      : storage_(storage), ledger_(ledger), lo_(0), hi_(entries), at_or_after_(std::move(at_or_after)),
        done_(std::move(done)) {}

  void probe() {
    if (lo_ >= hi_) return done_(lo_);
    const EntryId mid = lo_ + (hi_ - lo_) / 2;
    storage_.read_entries(ledger_, mid, mid, [self = shared_from_this(), mid](Result<std::vector<storage::Entry>> r) {
      if (!r) return self->done_(r.status());
      auto decoded = decode_entry(r->front().data);
      if (!decoded) return self->done_(decoded.status());
      if (self->at_or_after_(decoded->first)) {
        self->hi_ = mid;
      } else {
        self->lo_ = mid + 1;
      }
      self->probe();
    });
  }

 private:
  storage::Storage& storage_;
  const LedgerId ledger_;
  EntryId lo_;
  EntryId hi_;
  std::function<bool(const MessageHeader&)> at_or_after_;
  Callback<Result<EntryId>> done_;
};

Position origin_of(const MessageHeader& h) { return Position{h.origin_ledger, h.origin_entry}; }

}  // namespace

void ManagedLedger::delete_compacted_ledger(LedgerId id) {
  storage_.delete_ledger(id, [name = name_, id](Status st) {
    if (!st.is_ok() && st.code() != common::ErrorCode::kNotFound) {
      MLOG_WARN("managed ledger {}: compacted ledger {} not deleted: {}", name, id, st.to_string());
    }
  });
}

void ManagedLedger::begin_compacted_ledger(Callback<Status> done) {
  check_home();
  if (state_ == State::kClosed) {
    return later([done]() { done(Status::failed_precondition("managed ledger is closed")); });
  }
  if (compacting_.active) {
    return later([done, name = name_]() {
      done(Status::failed_precondition("a compaction of " + name + " is under way"));
    });
  }
  compacting_ = CompactingLedger{};
  compacting_.active = true;
  auto self = shared_from_this();
  ids_.allocate([self, done](Result<LedgerId> id) {
    if (!id) {
      self->compacting_ = CompactingLedger{};
      return done(id.status());
    }
    // Named in the list before it exists: a crash from here on leaves an id
    // the next open deletes, never a ledger nobody knows.
    self->compacting_.ledger = *id;
    self->persist_chain([self, done, id = *id](Status recorded) {
      if (!recorded.is_ok()) {
        self->compacting_ = CompactingLedger{};
        return done(recorded);
      }
      self->storage_.create_ledger(id, [self, done](Result<storage::LedgerWriter> w) {
        if (!w) {
          self->compacting_ = CompactingLedger{};
          self->persist_chain([](Status) {});
          return done(w.status());
        }
        self->compacting_.writer = *w;
        done(Status::ok());
      });
    });
  });
}

void ManagedLedger::add_compacted_entry(const MessageHeader& header, Slice payload, Callback<Status> done) {
  check_home();
  CompactingLedger& c = compacting_;
  if (!c.active || c.writer.ledger == 0) {
    return later([done]() { done(Status::failed_precondition("no compacted ledger is being written")); });
  }
  if (!c.failed.is_ok()) return later([done, st = c.failed]() { done(st); });
  if (c.in_flight >= kMaxCompactedInFlight) {
    return later([done]() { done(Status::resource_exhausted("too many compacted entries in flight")); });
  }
  if (c.first_index < 0) c.first_index = header.first_index;
  c.size += payload.size();
  ++c.in_flight;
  const LedgerId ledger = c.writer.ledger;
  auto self = shared_from_this();
  storage_.add_entry(c.writer, c.next_entry++, encode_entry(header, payload), [self, done, ledger](Status st) {
    CompactingLedger& now = self->compacting_;
    if (now.ledger == ledger) {
      --now.in_flight;
      if (!st.is_ok() && now.failed.is_ok()) now.failed = st;
    }
    done(st);
  });
}

void ManagedLedger::install_compacted_ledger(Position horizon, int64_t horizon_index, bool drop_covered,
                                             Callback<Status> done) {
  check_home();
  if (!compacting_.active || compacting_.writer.ledger == 0) {
    return later([done]() { done(Status::failed_precondition("no compacted ledger is being written")); });
  }
  if (!compacting_.failed.is_ok()) return later([done, st = compacting_.failed]() { done(st); });
  auto self = shared_from_this();
  storage_.close_ledger(compacting_.ledger, [self, horizon, horizon_index, drop_covered, done](Result<EntryId> closed) {
    if (!closed) return done(closed.status());
    const CompactingLedger written = self->compacting_;
    CompactedLedger view{written.ledger,
                         *closed + 1,
                         written.size,
                         horizon,
                         horizon_index,
                         written.first_index < 0 ? horizon_index : written.first_index,
                         now_ms()};
    const std::optional<CompactedLedger> previous = self->compacted_;
    const LedgerChain before = self->chain_;
    // Closed ledgers wholly at or before the horizon, when the view
    // replaces them; never the current one.
    size_t covered = 0;
    const auto& ledgers = self->chain_.ledgers();
    while (drop_covered && covered + 1 < ledgers.size()) {
      const ChainLedger& l = ledgers[covered];
      if (l.entries > 0 && Position{l.id, l.entries - 1} > horizon) break;
      ++covered;
    }
    std::vector<LedgerId> removed;
    for (size_t i = 0; i < covered; ++i) removed.push_back(ledgers[i].id);
    self->chain_.drop_front(covered);
    self->compacted_ = view;
    self->compacting_ = CompactingLedger{};
    self->compacted_hints_.clear();
    self->persist_chain([self, done, previous, before, written, removed, view](Status st) {
      if (!st.is_ok()) {
        // The view in place stays; the new ledger is still named as being
        // written, for abandon_compacted_ledger (or the next open) to delete.
        self->compacted_ = previous;
        self->chain_ = before;
        self->compacting_ = written;
        return done(st);
      }
      if (previous) self->delete_compacted_ledger(previous->ledger);
      for (LedgerId id : removed) {
        if (self->cold_ && self->cold_->observer.removed) self->cold_->observer.removed(id);
        self->storage_.delete_ledger(id, [self, id](Status del) {
          if (!del.is_ok()) MLOG_WARN("managed ledger {}: ledger {} not deleted: {}", self->name_, id, del.to_string());
        });
      }
      MLOG_INFO("managed ledger {}: compacted through {} into ledger {} ({} entries, {} bytes){}", self->name_,
                view.horizon.to_string(), view.ledger, view.entries, view.size,
                removed.empty() ? std::string() : ", dropping " + std::to_string(removed.size()) + " ledgers");
      done(Status::ok());
    });
  });
}

void ManagedLedger::roll_over_now() {
  check_home();
  if (state_ == State::kReady && next_entry_ > 0) roll_over();
}

void ManagedLedger::abandon_compacted_ledger(Callback<Status> done) {
  check_home();
  const LedgerId id = compacting_.ledger;
  const bool active = compacting_.active;
  if (!active || id == 0) {
    if (active && id == 0) return later([done]() { done(Status::failed_precondition("a compaction is starting")); });
    return later([done]() { done(Status::ok()); });
  }
  compacting_ = CompactingLedger{};
  auto self = shared_from_this();
  persist_chain([self, id, done](Status st) {
    self->delete_compacted_ledger(id);
    done(st);
  });
}

int64_t ManagedLedger::compacted_first_index() const {
  const int64_t log_first = chain_.empty() ? next_index_ : chain_.ledgers().front().first_index;
  if (!compacted_) return log_first;
  return std::min(compacted_->first_index, log_first);
}

void ManagedLedger::read_compacted(Position after, size_t max_entries,
                                   Callback<Result<std::vector<LedgerEntry>>> done) {
  check_home();
  if (!compacted_ || after >= compacted_->horizon) return read_entries(after, max_entries, std::move(done));
  // Before the log's first entry (where an earliest cursor starts) is
  // before the whole view, whose entries may be in ledgers since dropped.
  if (after.entry == storage::kNoEntry && !chain_.empty() && after.ledger <= chain_.ledgers().front().id) {
    after = Position{0, storage::kNoEntry};
  }
  if (auto hint = compacted_hints_.find(after); hint != compacted_hints_.end()) {
    return read_compacted_at(hint->second, max_entries, std::move(done));
  }
  auto self = shared_from_this();
  find_compacted([after](const MessageHeader& h) { return origin_of(h) > after; },
                 [self, max_entries, done](Result<EntryId> first) {
                   if (!first) return done(first.status());
                   self->read_compacted_at(*first, max_entries, done);
                 });
}

void ManagedLedger::read_compacted_from_index(int64_t index, size_t max_entries,
                                              Callback<Result<std::vector<LedgerEntry>>> done) {
  check_home();
  auto self = shared_from_this();
  if (!compacted_ || index >= compacted_->horizon_index) {
    // After the view: the log's own entries (kNotFound past its end).
    return seek_by_index(index, [self, max_entries, done](Result<Position> at) {
      if (!at) return done(at.status());
      self->read_entries(before(*at), max_entries, done);
    });
  }
  find_compacted(
      [index](const MessageHeader& h) { return h.first_index + static_cast<int64_t>(h.messages) > index; },
      [self, max_entries, done](Result<EntryId> first) {
        if (!first) return done(first.status());
        self->read_compacted_at(*first, max_entries, done);
      });
}

void ManagedLedger::find_compacted(std::function<bool(const MessageHeader&)> at_or_after,
                                   Callback<Result<EntryId>> done) {
  auto search = std::make_shared<CompactedSearch>(storage_, compacted_->ledger, compacted_->entries,
                                                  std::move(at_or_after), std::move(done));
  later([search]() { search->probe(); });
}

void ManagedLedger::read_compacted_at(EntryId first, size_t max_entries,
                                      Callback<Result<std::vector<LedgerEntry>>> done) {
  if (!compacted_) return later([done]() { done(Status::unavailable("the compacted view changed; read again")); });
  const CompactedLedger view = *compacted_;
  if (first >= view.entries || max_entries == 0) return read_entries(view.horizon, max_entries, std::move(done));
  const EntryId last = std::min<EntryId>(view.entries - 1, first + static_cast<EntryId>(max_entries) - 1);
  auto self = shared_from_this();
  storage_.read_entries(view.ledger, first, last,
                        [self, first, view, done](Result<std::vector<storage::Entry>> entries) {
                          if (!entries) return done(entries.status());
                          std::vector<LedgerEntry> out;
                          out.reserve(entries->size());
                          for (const storage::Entry& e : *entries) {
                            auto decoded = decode_entry(e.data);
                            if (!decoded) return done(decoded.status());
                            const Position at = origin_of(decoded->first);
                            out.push_back(LedgerEntry{at, std::move(decoded->first), std::move(decoded->second)});
                          }
                          if (!out.empty() && self->compacted_ == view) {
                            if (self->compacted_hints_.size() >= kMaxCompactedHints) self->compacted_hints_.clear();
                            self->compacted_hints_[out.back().position] = first + static_cast<EntryId>(out.size());
                          }
                          done(std::move(out));
                        });
}

}  // namespace magnetar::ledger
