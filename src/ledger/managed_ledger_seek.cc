// Seeks of the managed ledger: positions by ordinal, and a binary search by
// message index or publish time.
#include "common/logging.h"
#include "ledger/managed_ledger.h"

namespace magnetar::ledger {

using common::Result;
using common::Status;

Position ManagedLedger::position_of(uint64_t ordinal) const {
  for (const ChainLedger& l : chain_.ledgers()) {
    if (ordinal < static_cast<uint64_t>(l.entries)) return Position{l.id, static_cast<EntryId>(ordinal)};
    ordinal -= static_cast<uint64_t>(l.entries);
  }
  return Position{};
}

uint64_t ManagedLedger::ordinal_of(Position p) const {
  uint64_t ordinal = 0;
  for (const ChainLedger& l : chain_.ledgers()) {
    if (l.id == p.ledger) return ordinal + static_cast<uint64_t>(p.entry);
    ordinal += static_cast<uint64_t>(l.entries);
  }
  return ordinal;
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
