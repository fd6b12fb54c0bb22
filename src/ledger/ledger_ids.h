// LedgerIdAllocator: hands out storage ledger ids, unique across the
// metadata store, to every managed ledger of a node.
//
// The next free id lives in the metadata store; the allocator reserves a
// block of ids there with one compare-and-set and hands them out from
// memory, so that thousands of topics opening at once cost a few metadata
// writes, not two each, and never contend with one another. Ids of a block
// not handed out before a restart are skipped, never reused.
//
// Threads: allocate() from any thread; the answer runs on the caller's
// reactor (never inline there), or on the metadata store's thread for a
// caller that is not a reactor. Callers waiting while a block is reserved
// are bounded by the topics being opened at once.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <utility>

#include "common/result.h"
#include "metadata/store.h"
#include "runtime/reactor.h"
#include "storage/storage.h"

namespace magnetar::ledger {

class LedgerIdAllocator {
 public:
  static constexpr uint64_t kDefaultBlock = 256;
  // The metadata key holding the first id not reserved yet.
  static constexpr const char* kNextIdKey = "/managed-ledgers-next-id";

  explicit LedgerIdAllocator(metadata::Store& store, uint64_t block = kDefaultBlock);
  LedgerIdAllocator(const LedgerIdAllocator&) = delete;
  LedgerIdAllocator& operator=(const LedgerIdAllocator&) = delete;

  // An id above `above`: a topic's ledgers must follow its last one, since
  // positions order by ledger id first. Within a cluster each member hands
  // out its own block, so a topic that moved to a member with an older block
  // would otherwise get a smaller id. Ids of the block up to `above` are
  // skipped; a new block is always above every id handed out before.
  void allocate(std::function<void(common::Result<storage::LedgerId>)> done, storage::LedgerId above = 0);

 private:
  struct Waiter {
    runtime::Reactor* home;
    std::function<void(common::Result<storage::LedgerId>)> done;
  };
  // Reserves the next block (one at a time), then serves the waiters.
  void refill(int attempts_left);
  void answer(std::deque<Waiter> waiters, const common::Status& failure);
  static void deliver(runtime::Reactor* home, runtime::Task fn);

  metadata::Store& store_;
  const uint64_t block_;
  std::mutex mu_;
  storage::LedgerId next_ = 0;   // next id of the current block
  storage::LedgerId limit_ = 0;  // one past its last
  bool refilling_ = false;
  std::deque<Waiter> waiting_;
};

}  // namespace magnetar::ledger
