// StorageServer: a storage node's side of replicated ledgers. It keeps the
// copies this node holds in its local storage and answers the storage
// protocol (replication.fbs): add an entry, read entries, read the last add
// confirmed with or without fencing, delete a copy.
//
// A copy of ledger L is local ledger L (ledger ids are unique in the
// cluster). A node may hold a run of L's entries that starts past 0 (it
// joined L's ensemble when another node was replaced), so each local entry
// starts with a header, the ledger entry id and the writer's last add
// confirmed. A run's entries are contiguous: an add past the next expected
// entry is refused, so that a writer replaces a node that missed one rather
// than leave a hole. Only an add marked `new_run` (a healer's or a
// decommissioning writer's first) starts another run, after the local
// entries already held, for entries this node does not hold; the node
// records where (local index, first ledger entry) in its LevelDB, synced,
// before it stores the run's first entry. Adds go to the last run only.
//
// Striping: a striped ledger's adds name their fragment's ensemble and
// write quorum, from which the node knows its stripe (ledger_meta.h): the
// entries of its run are then every entry the stripe holds from the run's
// first, stored at consecutive local entries, and "contiguous" means no
// held entry missed. The stripe is recorded with the run (the first run's
// too), so local entry k is always the run's k-th held entry.
//
// Fencing (BookKeeper's): once fenced, a copy refuses every add but a
// recovery's. The fence is written to disk (LevelDB, synced) before it is
// answered, and the answer waits for the adds already under way, so that
// whatever the old writer was told is stored is visible to the recovery.
//
// Threads: every method on the one reactor the server was started on (the
// cluster reactor); answers are given there, never inline for a request
// that touches the disk.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/metrics.h"
#include "common/status.h"
#include "replication/ledger_meta.h"
#include "runtime/worker_thread.h"
#include "storage/storage.h"

namespace leveldb {
class DB;
}

namespace magnetar::replication {

// The bytes a local entry starts with: the ledger entry id and the writer's
// last add confirmed, both little-endian int64.
inline constexpr size_t kReplicaHeaderBytes = 16;

class StorageServer {
 public:
  using Reply = std::function<void(std::string payload)>;

  // `fence_dir`: where the fences live (created if missing).
  StorageServer(storage::Storage& local, std::string fence_dir);
  ~StorageServer();
  StorageServer(const StorageServer&) = delete;
  StorageServer& operator=(const StorageServer&) = delete;

  // Blocking, before any request: opens the fences.
  common::Status start();
  void stop();

  // One request each (payload: the replication.fbs table); `reply` gets the
  // answer's bytes.
  void add(std::string_view payload, Reply reply);
  void read(std::string_view payload, Reply reply);
  void fence(std::string_view payload, Reply reply);
  void remove(std::string_view payload, Reply reply);

  // Before serving: this node's storage was found wiped (or replaced) at a
  // time when ledgers below `ledger` existed. It cannot tell whether it held
  // a copy of one of them, so it never answers "absent" for them (an error
  // instead, which a recovery does not count) and refuses adds to them.
  void set_wiped_below(LedgerId ledger) { wiped_below_ = ledger; }

  // Before any request: this node's id, to find itself in a striped add's ensemble.
  void set_self(NodeId self) { self_ = self; }

  // How many copies this node holds in memory now (for /metrics and tests).
  size_t copies() const { return copies_.size(); }

 private:
  // The `count` ledger entries `stripe` holds from `first` on, at local
  // entries local.. .
  struct Run {
    EntryId first = 0;
    EntryId local = 0;
    EntryId count = 0;
    Stripe stripe;
    // The last entry of the run's first `n` (n > 0).
    EntryId entry_at(EntryId n) const { return stripe.nth_held(first, n - 1); }
    // The local entry holding `entry` (which the run holds).
    EntryId local_of(EntryId entry) const { return local + stripe.held_between(first, entry); }
  };
  struct StoredRun {
    EntryId local = 0;
    EntryId first = 0;
    Stripe stripe;
    bool operator<(const StoredRun& o) const { return local < o.local; }
  };
  struct Copy {
    enum class Phase { kLoading, kCreating, kReady, kBroken };
    Phase phase = Phase::kLoading;
    storage::LedgerWriter writer;
    bool held = false;                   // a local ledger exists
    std::vector<Run> runs;               // in local order; the last takes the adds; none before the first add
    EntryId lac = storage::kNoEntry;
    uint8_t fsync = 255;
    uint32_t fsync_interval_ms = 0;
    uint32_t in_flight = 0;              // local adds not yet completed
    common::Status failure;              // kBroken: why
    std::vector<std::function<void()>> waiting;  // requests that arrived while loading or creating
    std::vector<std::function<void()>> drained;  // fence answers waiting for in_flight == 0
  };

  // Runs `then` once the copy of `ledger` is loaded from local storage (or
  // known to be absent).
  void with_copy(LedgerId ledger, std::function<void(Copy&)> then);
  void load(LedgerId ledger);
  void finish_load(LedgerId ledger, common::Status st);
  void run_waiting(Copy& copy);
  struct AddRequest {
    EntryId entry = 0;
    EntryId lac = storage::kNoEntry;
    common::Slice data;  // header and payload, as stored
    uint8_t fsync = 255;
    uint32_t interval_ms = 0;
    bool new_run = false;
    Stripe stripe;
  };
  void add_loaded(Copy& copy, LedgerId ledger, AddRequest add, Reply reply);
  void append(Copy& copy, LedgerId ledger, EntryId entry, EntryId lac, common::Slice data, Reply reply);
  void drain_done(Copy& copy);
  // The run holding ledger entry `entry`, or null.
  static const Run* run_of(const Copy& copy, EntryId entry);
  // The ledger entry the next add must be: the one after the last run's.
  static EntryId next_of(const Copy& copy);
  // Starts a run at `entry` after the local entries held (recorded on disk
  // first; a first run only when striped).
  void start_run(Copy& copy, LedgerId ledger, EntryId entry, Stripe stripe);
  // Writes (or erases, without a value) `key` in the node's LevelDB, synced,
  // on the fence thread; `done` runs back here.
  void sync_write(std::string key, std::optional<std::string> value, std::string what,
                  std::function<void(common::Status)> done);
  // Writes (or erases) the fence of `ledger`.
  void persist_fence(LedgerId ledger, bool fenced, std::function<void(common::Status)> done);

  storage::Storage& local_;
  const std::string fence_dir_;
  std::unique_ptr<leveldb::DB> fences_db_;
  std::unique_ptr<runtime::WorkerThread> fence_thread_;
  std::set<LedgerId> fenced_;          // refusing adds but a recovery's
  std::set<LedgerId> durable_fences_;  // ... and on disk
  // Runs recorded on disk (past each copy's first, a striped first too), as read at start, until the copy loads.
  std::unordered_map<LedgerId, std::vector<StoredRun>> stored_runs_;
  // Fences being synced, and the answers that wait for the sync.
  std::unordered_map<LedgerId, std::vector<std::function<void(common::Status)>>> fences_syncing_;
  LedgerId wiped_below_ = 0;
  NodeId self_ = 0;
  std::unordered_map<LedgerId, Copy> copies_;
  common::Counter& entries_added_;
  common::Counter& fences_;
};

// Encodes an Outcome (AddEntry's and DeleteReplica's answer).
std::string encode_outcome(const common::Status& st);
common::Status decode_outcome(std::string_view bytes);

}  // namespace magnetar::replication
