// Topic: moving a subscription to a message or a point in time (Pulsar's
// SEEK and the REST reset-cursor calls), and where a new reader starts.
#include <cstdint>

#include "broker/topic.h"
#include "ledger/managed_ledger.h"

namespace magnetar::broker {

using common::Result;
using common::Status;
using ledger::Position;

Position Topic::position_before(Position first) const {
  const auto& chain = log_->chain();
  Position last = log_->last_confirmed();
  if (chain.empty()) return last;
  if (first.ledger < chain.ledgers().front().id) {
    // Before the log's ledgers: a position its compacted view may still
    // hold (log_->before_first() is before the view then), else its start.
    const Position start = log_->before_first();
    return first > start ? Position{first.ledger, first.entry - 1} : start;
  }
  if (first > last) return last;
  return Position{first.ledger, first.entry - 1};
}

Position Topic::reader_start(Position start_after, InitialPosition initial) const {
  // Pulsar's non-durable cursor: past the last entry the initial position
  // decides; before the first entry held, the earliest.
  const auto& chain = log_->chain();
  const Position last = log_->last_confirmed();
  const Position before_first = chain.empty() ? last : log_->before_first();
  if (start_after > last) return initial == InitialPosition::kEarliest ? before_first : last;
  if (start_after < before_first) return before_first;
  return start_after;
}

void Topic::seek_subscription(const std::string& name, Position first, ledger::Callback<Status> done,
                              std::vector<uint64_t> unacked) {
  const Position mark_delete = position_before(first);
  const bool at_first = mark_delete == Position{first.ledger, first.entry - 1} && log_->chain().contains(first);
  if (unacked.empty() || !at_first) return move_subscription(name, mark_delete, nullptr, std::move(done));
  // The messages the ack set leaves out are acknowledged with the batch's
  // size, which its entry holds.
  std::weak_ptr<bool> alive = alive_;
  log_->read_entries(mark_delete, 1, [this, alive, name, first, mark_delete, unacked = std::move(unacked),
                                      done = std::move(done)](Result<std::vector<ledger::LedgerEntry>> r) mutable {
    if (alive.expired()) return done(Status::unavailable("the topic was closed meanwhile"));
    uint32_t messages = 1;
    if (r.is_ok() && !r->empty() && r->front().position == first) messages = r->front().header.messages;
    std::function<void()> skip;
    if (messages > 1) {
      skip = [this, name, first, messages, unacked = std::move(unacked)]() {
        for (uint32_t i = 0; i < messages; ++i) {
          const bool again = i / 64 < unacked.size() && ((unacked[i / 64] >> (i % 64)) & 1) != 0;
          if (!again) (void)log_->ack_batch_index(name, first, i, messages);
        }
      };
    }
    move_subscription(name, mark_delete, std::move(skip), std::move(done));
  });
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
  ml->seek_by_time(time_ms, [this, alive, name, time_ms, done = std::move(done)](common::Result<Position> first) {
    if (alive.expired()) return done(Status::unavailable("the topic was closed meanwhile"));
    Position mark_delete;
    if (first.is_ok()) {
      mark_delete = Position{first->ledger, first->entry - 1};
      // The log's first entry: from the start, a compacted view included.
      const auto& ledgers = log_->chain().ledgers();
      if (first->entry == 0 && !ledgers.empty() && first->ledger == ledgers.front().id) {
        mark_delete = log_->before_first();
      }
    } else if (first.status().code() == common::ErrorCode::kNotFound) {
      mark_delete = log_->last_confirmed();  // nothing published since
    } else {
      return done(first.status());
    }
    // A compacted view holds no publish times to search, only entries
    // published before it was made: a time before that reads the whole
    // view (some of it may be older than asked; never less than asked).
    auto* managed = dynamic_cast<ledger::ManagedLedger*>(log_.get());
    if (managed != nullptr && managed->compacted() && time_ms < managed->compacted()->created_ms) {
      mark_delete = log_->before_first();
    }
    reset_subscription(name, mark_delete, std::move(done));
  });
}

}  // namespace magnetar::broker
