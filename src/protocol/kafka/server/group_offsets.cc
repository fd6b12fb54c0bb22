#include "protocol/kafka/server/group_offsets.h"

#include "ledger/managed_ledger.h"
#include "protocol/kafka/server/offsets.h"

namespace magnetar::protocol::kafka {

using common::Result;
using common::Status;
using ledger::Position;

namespace {

// The first message index of the entry right after `after`, or the high
// watermark when there is none.
void index_after(ledger::Log& log, Position after, std::function<void(ErrorCode, int64_t)> done) {
  const auto& chain = log.chain();
  const int64_t end = high_watermark(log);
  if (chain.empty()) return done(kNone, end);
  auto next = chain.next(after);
  if (!next) return done(kNone, end);
  const ledger::ChainLedger* l = chain.find(next->ledger);
  if (l != nullptr && l->runs_complete() && next->entry < l->entries) {
    return done(kNone, l->first_index + static_cast<int64_t>(l->messages_before(next->entry)));
  }
  log.read_entries(after, 1, [end, done](Result<std::vector<ledger::LedgerEntry>> entries) {
    if (!entries.is_ok()) return done(kKafkaStorageError, -1);
    if (entries->empty()) return done(kNone, end);
    done(kNone, entries->front().header.first_index);
  });
}

// What a commit answers when its topic was unloaded while it waited: a
// retriable error, so the client commits again.
constexpr ErrorCode kTopicGone = kLeaderNotAvailable;

void move_cursor(broker::Topic* topic, const std::string& group, Position mark_delete, int64_t aligned,
                 std::function<void(ErrorCode, int64_t)> done) {
  auto reset = [topic, alive = topic->liveness(), group, mark_delete, aligned, done]() {
    if (alive.expired()) return done(kTopicGone, -1);
    topic->reset_subscription(group, mark_delete, [aligned, done](Status st) {
      done(st.is_ok() ? kNone : error_code(st), aligned);
    });
  };
  if (topic->subscription(group) != nullptr) return reset();
  topic->create_subscription(group, broker::InitialPosition::kEarliest,
                             [reset, done](Result<broker::Subscription*> s) {
                               if (!s.is_ok() && s.status().code() != common::ErrorCode::kAlreadyExists) {
                                 return done(error_code(s.status()), -1);
                               }
                               reset();
                             });
}

}  // namespace

void commit_group_offset(broker::Topic* topic, const std::string& group, int64_t offset,
                         std::function<void(ErrorCode, int64_t)> done) {
  ledger::Log& log = topic->log();
  const int64_t end = high_watermark(log);
  if (offset >= end || log.chain().empty()) return move_cursor(topic, group, log.last_confirmed(), end, done);
  const int64_t target = std::max(offset, log_start_offset(log));
  auto at_entry = [topic, alive = topic->liveness(), group, done](ledger::Log& log, Position at) {
    if (alive.expired()) return done(kTopicGone, -1);
    Position mark_delete{at.ledger, at.entry - 1};
    index_after(log, mark_delete, [topic, alive, group, mark_delete, done](ErrorCode e, int64_t aligned) {
      if (e != kNone) return done(e, -1);
      if (alive.expired()) return done(kTopicGone, -1);
      move_cursor(topic, group, mark_delete, aligned, done);
    });
  };
  if (auto at = log.chain().entry_of_index(target)) return at_entry(log, *at);
  auto* managed = dynamic_cast<ledger::ManagedLedger*>(&log);
  if (managed == nullptr) return move_cursor(topic, group, log.last_confirmed(), end, done);
  managed->seek_by_index(target, [at_entry, done, keep = managed->shared_from_this()](Result<Position> at) {
    if (!at.is_ok()) return done(kKafkaStorageError, -1);
    at_entry(*keep, *at);
  });
}

void fetch_group_offset(broker::Topic* topic, const std::string& group,
                        std::function<void(ErrorCode, int64_t)> done) {
  broker::Subscription* sub = topic->subscription(group);
  if (sub == nullptr) return done(kNone, -1);
  index_after(topic->log(), sub->cursor().mark_delete_position(), std::move(done));
}

}  // namespace magnetar::protocol::kafka
