// LedgerReconciler: deletes storage ledgers that no managed ledger names.
//
// A crash between a metadata write and the storage call that goes with it
// (a topic deleted before its ledgers were, a ledger trimmed from its list
// but not from storage, a ledger created whose list write never happened)
// leaves a ledger that nothing reads or deletes, and it keeps every segment
// it has records in on disk. Each pass lists storage's ledgers, reads every
// stored ledger list under /managed-ledgers/, and deletes each ledger no
// list names that either is older than this process (its id is below the
// first id this process could have reserved, read at start; a single node
// only; in a cluster, one whose cluster-wide ledger record is gone) or was
// unnamed at the previous pass too, so a ledger whose list write is under
// way is left alone. When most of storage's ledgers are unnamed (more than half,
// and more than kMaxUnchecked) the pass deletes none and says so: that is a
// metadata store that lost its records or belongs to another node, which
// takes a person, not a sweep. A ledger a list names that storage does not
// have is counted and logged: data was lost, and nothing here can bring it
// back.
//
// Threads: its own ("ledger-reconcile"), which blocks on the metadata store
// and on storage; a pass runs at start and every `interval` (0: at start only).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "common/metrics.h"
#include "common/result.h"
#include "metadata/store.h"
#include "runtime/component.h"
#include "storage/storage.h"

namespace magnetar::ledger {

class LedgerReconciler final : public runtime::Component {
 public:
  struct Pass {
    size_t stored = 0;   // ledgers storage had
    size_t named = 0;    // ledgers the stored lists name
    size_t deleted = 0;  // unnamed ledgers deleted
    size_t waiting = 0;  // unnamed ledgers made by this process, left for the next pass
    size_t missing = 0;  // named ledgers storage does not have
    size_t refused = 0;  // unnamed ledgers kept because most ledgers were unnamed
  };
  // Up to this many unnamed ledgers are deleted even when they are most of storage's.
  static constexpr size_t kMaxUnchecked = 4;

  LedgerReconciler(storage::Storage& storage, metadata::Store& store, std::chrono::milliseconds interval);
  ~LedgerReconciler() override;

  std::string_view name() const override { return "ledger-reconcile"; }
  // Reads the first id this process may hand out, then starts the thread.
  // REQUIRES: storage and the store started, no ledger id handed out yet.
  common::Status start() override;
  void stop() override;

  // Before start(): this storage holds only some of the ledgers the lists
  // name (a cluster member's copies: the rest are on other members), so a
  // named ledger it lacks is not a loss and is not reported. Ids below this
  // process's first are then no sign of an old ledger (other members still
  // hand them out), so every unnamed copy is given a pass to be named.
  void set_holds_every_ledger(bool every) { holds_every_ledger_ = every; }
  // Before start(), with set_holds_every_ledger(false): where each ledger's
  // cluster-wide record lives ("<prefix>/<id>", written before any copy
  // and deleted with the ledger). An unnamed copy whose record is gone is
  // deleted at once; one whose record is there waits a pass.
  void set_ledger_records(std::string prefix) { records_prefix_ = std::move(prefix); }

  // One pass now, on the caller's thread (not a reactor, not the store's).
  common::Result<Pass> run_pass();
  // Passes finished (or failed) so far.
  uint64_t passes() const { return passes_.load(std::memory_order_acquire); }

 private:
  void run();

  storage::Storage& storage_;
  metadata::Store& store_;
  const std::chrono::milliseconds interval_;
  storage::LedgerId first_of_process_ = 0;  // ids below it were made before this process
  bool holds_every_ledger_ = true;
  std::string records_prefix_;
  bool ledger_recorded(storage::LedgerId id);
  std::set<storage::LedgerId> unnamed_;     // unnamed at the last pass, made by this process

  std::mutex pass_mu_;  // one pass at a time
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::atomic<bool> abort_{false};
  std::atomic<uint64_t> passes_{0};
  std::thread thread_;

  common::Counter& deleted_;
  common::Gauge& missing_;
};

}  // namespace magnetar::ledger
