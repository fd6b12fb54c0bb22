#include "ledger/ledger_ids.h"

#include <string>

#include "common/logging.h"

namespace magnetar::ledger {

using common::Result;
using common::Status;
using storage::LedgerId;

namespace {

// Other nodes of a cluster reserve blocks too: a conflict is retried.
constexpr int kMaxAttempts = 100;

}  // namespace

LedgerIdAllocator::LedgerIdAllocator(metadata::Store& store, uint64_t block)
    : store_(store), block_(block == 0 ? 1 : block) {}

void LedgerIdAllocator::deliver(runtime::Reactor* home, runtime::Task fn) {
  if (home == nullptr) return fn();
  // An answer is never dropped: a full mailbox is retried by post_reliably.
  home->post_reliably(std::move(fn));
}

void LedgerIdAllocator::allocate(std::function<void(Result<LedgerId>)> done, LedgerId above) {
  runtime::Reactor* home = runtime::Reactor::current();
  LedgerId id = 0;
  bool start = false;
  {
    std::lock_guard lock(mu_);
    if (next_ <= above) next_ = std::min(above + 1, limit_);  // at limit_: a new block, above them all
    if (next_ < limit_) {
      id = next_++;
    } else {
      waiting_.push_back(Waiter{home, std::move(done)});
      start = !refilling_;
      refilling_ = true;
    }
  }
  if (id != 0) return deliver(home, [done = std::move(done), id]() { done(id); });
  if (start) refill(kMaxAttempts);
}

void LedgerIdAllocator::refill(int attempts_left) {
  if (attempts_left == 0) {
    std::deque<Waiter> waiters;
    {
      std::lock_guard lock(mu_);
      waiters.swap(waiting_);
      refilling_ = false;
    }
    return answer(std::move(waiters), Status::unavailable("ledger id allocation kept conflicting"));
  }
  store_.get(LedgerIdAllocator::kNextIdKey, [this, attempts_left](Result<metadata::Record> rec) {
    LedgerId first = 1;
    int64_t expected = metadata::kMustNotExist;
    if (rec) {
      first = std::stoull(rec->value);
      expected = rec->stat.version;
    } else if (rec.status().code() != common::ErrorCode::kNotFound) {
      std::deque<Waiter> waiters;
      {
        std::lock_guard lock(mu_);
        waiters.swap(waiting_);
        refilling_ = false;
      }
      return answer(std::move(waiters), rec.status());
    }
    const LedgerId limit = first + block_;
    store_.put(LedgerIdAllocator::kNextIdKey, std::to_string(limit), metadata::PutOptions{expected, 0},
               [this, attempts_left, first, limit](Result<metadata::Stat> st) {
                 if (!st) {
                   auto code = st.status().code();
                   if (code == common::ErrorCode::kFailedPrecondition ||
                       code == common::ErrorCode::kAlreadyExists) {
                     return refill(attempts_left - 1);
                   }
                   std::deque<Waiter> waiters;
                   {
                     std::lock_guard lock(mu_);
                     waiters.swap(waiting_);
                     refilling_ = false;
                   }
                   return answer(std::move(waiters), st.status());
                 }
                 // Serve the waiters from the new block; more waiters than
                 // ids left for the next block.
                 std::deque<std::pair<Waiter, LedgerId>> served;
                 bool more = false;
                 {
                   std::lock_guard lock(mu_);
                   next_ = first;
                   limit_ = limit;
                   while (!waiting_.empty() && next_ < limit_) {
                     served.emplace_back(std::move(waiting_.front()), next_++);
                     waiting_.pop_front();
                   }
                   more = !waiting_.empty();
                   refilling_ = more;
                 }
                 for (auto& [w, id] : served) deliver(w.home, [done = std::move(w.done), id = id]() { done(id); });
                 if (more) refill(kMaxAttempts);
               });
  });
}

void LedgerIdAllocator::answer(std::deque<Waiter> waiters, const Status& failure) {
  MLOG_WARN("ledger ids: cannot reserve a block: {}", failure.to_string());
  for (Waiter& w : waiters) deliver(w.home, [done = std::move(w.done), failure]() { done(failure); });
}

}  // namespace magnetar::ledger
