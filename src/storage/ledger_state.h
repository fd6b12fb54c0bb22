// LedgerState: what storage knows about one ledger in memory.
//
// Shared (shared_ptr) by the ledger table, the journal requests in flight
// and the read path. Fields under `mu` are the writer's view, changed by
// callers; the journal thread's fields are touched by it alone;
// last_confirmed is published by the journal thread for readers.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "common/status.h"
#include "storage/storage.h"

namespace magnetar::storage {

enum class LedgerPhase {
  kCreating,  // create record not yet durable: no writer may add
  kOpen,
  kClosing,   // close record submitted: adds are refused
  kClosed,
  kDeleted,
};

struct LedgerState {
  explicit LedgerState(LedgerId ledger) : id(ledger) {}
  const LedgerId id;

  std::mutex mu;  // guards the fields below and keeps journal order = check order
  LedgerPhase phase = LedgerPhase::kCreating;
  uint64_t writer = 0;          // token of the attached writer; 0 when none
  EntryId next_entry = 0;       // the id the writer must add next
  EntryId closed_last = kNoEntry;  // when kClosed
  common::Status failure;       // set once an add failed: every later add fails with it

  // Highest entry whose add completed (durable per the fsync mode).
  std::atomic<EntryId> last_confirmed{kNoEntry};

  // How this ledger's records are made durable (Storage::set_fsync):
  // kNodeFsync follows StorageOptions::fsync_mode, else a FsyncMode value,
  // with its interval for kInterval. Read by the journal thread per record.
  static constexpr uint8_t kNodeFsync = 0xff;
  std::atomic<uint8_t> fsync{kNodeFsync};
  std::atomic<uint32_t> fsync_interval_ms{0};

  // Journal thread only: the last entry written to a segment in stream
  // order, whether a failed write or sync has broken the ledger, and the
  // segment it last wrote to (0: none yet).
  EntryId journal_last = kNoEntry;
  bool journal_broken = false;
  uint64_t journal_segment = 0;
};

}  // namespace magnetar::storage
