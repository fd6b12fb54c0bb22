// ReplicatedStorage: storage::Storage over storage nodes, the way
// BookKeeper does it. The managed ledger above does not change.
//
// - create_ledger picks an ensemble of live storage nodes (never two copies
//   on one node) and records the ledger (ledger_meta.h) in the metadata store.
// - add_entry sends the entry to its write set and completes once
//   ack_quorum nodes stored it and every earlier entry completed; the
//   writer's last add confirmed (LAC) travels with each entry.
// - A node that fails an add (an error, no answer within add_timeout) is
//   replaced: a new fragment, from LAC + 1, names a live node not in the
//   ensemble, written by compare-and-set, and the entries not yet confirmed
//   go to it. With no node to spare the writer goes on without it while an
//   ack quorum is left (the ledger is then under-replicated).
// - close_ledger by the writer seals the record at its LAC (kFenced when
//   another has begun to recover it meanwhile). close_ledger by
//   anyone else recovers the ledger: marks it recovering (so the old writer
//   can no longer change its ensemble), fences enough of the last
//   fragment's nodes that no ack quorum is left unfenced, reads forward from
//   the highest LAC, writes each entry any node returns to its whole write
//   set, stops at the first entry that enough nodes report absent that no
//   ack quorum could have held it, and seals the record there. A fenced
//   copy that had fallen behind the LAC is then sent what it lacks
//   (fill_lagging), in the background.
// - read_entries reads each fragment from one of its nodes, this node first,
//   and goes on to the next node when one fails or lacks an entry.
//
// Ledgers without a record (made by this node's local storage before
// replication) are served by `local` as before.
//
// - Self-healing: on the member that `heals()` says (the metadata leader),
//   every heal_interval the records are checked; a fragment naming a
//   storage node gone longer than heal_grace is copied, a read's worth of
//   entries (up to 8 MiB) in flight at a time and no faster than
//   heal_rate_bytes, from its other nodes to a live node not in that
//   fragment (copy_targets), and the record then names that node instead
//   (compare-and-set). What it is doing is published at kHealingKey (at
//   most about once a second while it copies). The new node may hold other
//   entries of the ledger (not of that fragment): it keeps the copy as a run
//   of its own (storage_server.h). The last fragment of an open ledger is
//   its writer's to mend; its older ones are healed like a closed ledger's,
//   and the writer merges such a change into its own (write_record).
// - Decommissioning (kDrainingPrefix in ledger_meta.h): a draining node is
//   never chosen for a copy. A writer whose open ledger has a copy on it
//   gives a node not in its last fragment (copy_targets) the fragment's entries up
//   to the LAC, then, with adds held, the last ones, then names it in the
//   draining node's place and sends it the adds waiting (with no such node
//   the copy stays until one is free or the ledger closes). The healer
//   copies fragments off draining nodes without waiting for heal_grace.
// - Placement (placement.h): copies spread across the zones nodes declare,
//   within the storage groups the ledger's namespace names (its bookie
//   affinity group), for its whole life: replacements, moves and healing too.
//
// - Striping (BookKeeper's): with an ensemble of E nodes and a write quorum
//   Qw < E, entry e goes to the Qw nodes from position e mod E on, so each
//   node holds Qw of every E entries (its Stripe, ledger_meta.h) and E
//   nodes share the writes. The adds name the fragment's ensemble so that a
//   node knows its stripe; reads gather a range from the fragment's live
//   nodes at once; healing and moves copy only the stripe the lost or
//   leaving node held.
//
// Threads: every method from any thread; the state lives on the
// transport's reactor; callbacks run on the calling reactor.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/metrics.h"
#include "metadata/store.h"
#include "replication/ledger_meta.h"
#include "replication/placement.h"
#include "replication/requests.h"
#include "replication/transport.h"
#include "runtime/reactor.h"
#include "runtime/timer.h"
#include "storage/storage.h"

namespace magnetar::replication {

struct ReplicationSettings {
  // For ledgers created without options: min(3, live storage nodes) copies,
  // acknowledged at min(2, live storage nodes).
  int max_ensemble = 3;
  int max_ack_quorum = 2;
  unsigned add_timeout_ms = 5000;
  unsigned read_timeout_ms = 10000;
  // Adds a ledger may have waiting for their quorum; more fail with
  // ResourceExhausted.
  size_t max_pending_adds = 16384;
  // Records of ledgers this node only reads, kept for the next read.
  size_t max_cached_records = 4096;
  // Self-healing: how long a storage node may be gone before its copies are
  // made again on others, and how often the ledgers are checked (0: never).
  std::chrono::milliseconds heal_grace{std::chrono::seconds(60)};
  std::chrono::milliseconds heal_interval{std::chrono::seconds(10)};
  // The most bytes per second self-healing and decommissioning copy (0: as
  // fast as the nodes take them).
  uint64_t heal_rate_bytes = 100ull << 20;
};

class ReplicatedStorage final : public storage::Storage {
 public:
  ReplicatedStorage(Transport& transport, metadata::Store& store, storage::Storage& local,
                    ReplicationSettings settings = {});
  ~ReplicatedStorage() override;

  std::string_view name() const override { return "replicated-storage"; }
  common::Status start() override;
  void stop() override;

  // Any thread, before start(): whether this member runs the self-healing
  // passes now (the metadata leader); unset, it never does.
  void set_healer(std::function<bool()> heals) { heals_ = std::move(heals); }

  void create_ledger(LedgerId id, storage::Callback<common::Result<storage::LedgerWriter>> done) override;
  void create_ledger_with(LedgerId id, const storage::LedgerOptions& options,
                          storage::Callback<common::Result<storage::LedgerWriter>> done) override;
  void open_ledger(LedgerId id, storage::Callback<common::Result<storage::LedgerWriter>> done) override;
  void add_entry(const storage::LedgerWriter& writer, EntryId entry, common::Slice data,
                 storage::Callback<common::Status> done) override;
  common::Status set_fsync(LedgerId id, std::optional<storage::FsyncMode> mode,
                           std::chrono::milliseconds interval) override;
  void close_ledger(LedgerId id, storage::Callback<common::Result<EntryId>> done) override;
  void read_entries(LedgerId id, EntryId first, EntryId last,
                    storage::Callback<common::Result<std::vector<storage::Entry>>> done) override;
  void delete_ledger(LedgerId id, storage::Callback<common::Status> done) override;
  common::Result<storage::LedgerInfo> ledger_info(LedgerId id) const override;
  // Any thread: the storage nodes being decommissioned, as this node last read them.
  std::vector<NodeId> draining() const;
  std::vector<LedgerId> list_ledgers() const override;

 private:
  struct PendingAdd {
    EntryId entry = 0;
    std::string payload;          // the AddEntry, kept to send it to a replacement
    std::vector<NodeId> acked;    // nodes of its write set that stored it
    storage::Callback<common::Status> done;
    runtime::Reactor* home = nullptr;
    uint32_t stripe_epoch = 0;    // striped: the ensemble `payload` names (Ledger::stripe_epoch)
  };
  using CloseDone = std::pair<runtime::Reactor*, storage::Callback<common::Result<EntryId>>>;
  struct Ledger {
    LedgerMeta meta;
    int64_t version = 0;
    bool writing = false;  // this node is its writer
    uint64_t token = 0;
    EntryId lac = storage::kNoEntry;
    EntryId next = 0;
    std::deque<PendingAdd> pending;
    std::set<NodeId> failed;        // nodes that failed an add: no more adds, never chosen again
    common::Status failure;
    bool changing = false;          // an ensemble change is being written
    bool moving = false;            // a copy is being moved off a draining node
    bool move_holds = false;        // ... and `changing` is set by the move, holding the adds
    bool closing = false;
    std::vector<CloseDone> closers;
    uint32_t stripe_epoch = 0;      // striped: counts the last fragment's ensemble changes
  };
  // What a striped ledger's adds carry, as the callers' threads encode them.
  struct Striping {
    StripeInfo info;
    uint32_t epoch = 0;
  };
  struct Recovery;

  // Transport reactor.
  void run(runtime::Task task);
  void deliver(runtime::Reactor* home, runtime::Task fn);
  void with_record(LedgerId id, std::function<void(common::Result<Ledger*>)> then);
  void send(LedgerId id, Ledger& l, PendingAdd& add, NodeId node);
  void on_add_reply(LedgerId id, EntryId entry, NodeId node, common::Status st);
  void complete(LedgerId id, Ledger& l);
  void node_failed(LedgerId id, Ledger& l, NodeId node, const common::Status& why);
  void fail_ledger(LedgerId id, Ledger& l, const common::Status& why);
  // The writer's compare-and-set of its record at `version`. A conflict with
  // the healer (which changes only the fragments before the last of an open
  // ledger) is merged: read again, still open with the same last fragment,
  // its older fragments are taken into `next` and the write is tried again.
  // Any other change (a recovery) is the answer. `done` gets what was written.
  void write_record(LedgerId id, int64_t version, LedgerMeta next, int attempt,
                    std::function<void(common::Result<metadata::Stat>, LedgerMeta)> done);
  // Writes `next` (the last fragment changed: `old` replaced by
  // `replacement`) by compare-and-set, then resumes the adds.
  void change_ensemble(LedgerId id, Ledger& l, LedgerMeta next, NodeId old, NodeId replacement);
  // After the last fragment changed (or a change was given up): every entry
  // waiting goes to the nodes of its write set that lack it, a node that
  // failed meanwhile is replaced, and the adds complete.
  void resume_adds(LedgerId id, Ledger& l);
  // Decommissioning (transport reactor).
  std::vector<NodeId> placeable(std::vector<NodeId> live) const;
  std::string zone_of(NodeId node) { return transport_.zone_of(node); }
  std::string group_of(NodeId node) { return transport_.group_of(node); }
  static Affinity affinity_of(const LedgerMeta& meta) { return Affinity{meta.affinity_primary, meta.affinity_secondary}; }
  void refresh_draining();
  void move_off_draining(LedgerId id);
  void move_copy(LedgerId id, NodeId leaving, NodeId target, EntryId first, EntryId next, int rounds);
  void end_move(LedgerId id, Ledger& l);
  void seal(LedgerId id);
  void recover(LedgerId id);
  void recover_entry(const std::shared_ptr<Recovery>& r, EntryId entry);
  void finish_recovery(const std::shared_ptr<Recovery>& r, common::Status st);
  void fill_lagging(const std::shared_ptr<Recovery>& r);
  // Copies the entries next..end of `meta`'s last fragment (its stripe's,
  // striped) from the other nodes to `node`, which lacks them from `first`
  // on: a read's worth at a time, throttled as healing is.
  void fill_copy(LedgerId id, LedgerMeta meta, NodeId node, EntryId first, EntryId next, EntryId end);
  void read_from(LedgerId id, const LedgerMeta& meta, EntryId first, EntryId last, size_t node_index,
                 runtime::Reactor* home, storage::Callback<common::Result<std::vector<storage::Entry>>> done,
                 uint32_t max_bytes = 0);
  // A striped fragment's entries first..last: asked of every live node of
  // fragment `fragment` at once, the answers merged; as many from `first`
  // on as they hold between them without a gap.
  void read_striped(LedgerId id, const LedgerMeta& meta, size_t fragment, EntryId first, EntryId last,
                    runtime::Reactor* home, storage::Callback<common::Result<std::vector<storage::Entry>>> done,
                    uint32_t max_bytes);
  // The stripe information of `meta`'s fragment `fragment` with `target` in
  // `replaced`'s place (none for a ledger not striped).
  static std::optional<StripeInfo> stripe_info(const LedgerMeta& meta, size_t fragment, NodeId replaced = 0,
                                               NodeId target = 0);
  // Publishes (or drops) what a striped ledger's adds carry for the callers' threads.
  void publish_striping(LedgerId id, const Ledger& l);
  // How many bytes a copy (healing, decommissioning) reads and sends at a
  // time: an eighth of a second at the throttle's rate, 4 KiB to 8 MiB.
  uint32_t copy_batch_bytes() const;
  void publish_info(LedgerId id, const Ledger& l);
  void forget(LedgerId id);
  // Keeps a record this node no longer writes among the max_cached_records
  // most recent ones, dropping the oldest beyond them.
  void keep_for_reads(LedgerId id);
  // Self-healing, on the transport reactor.
  struct Healing;
  void heal_pass();
  void heal_next(const std::shared_ptr<Healing>& h);
  void heal_copy(const std::shared_ptr<Healing>& h, LedgerId id, LedgerMeta meta, size_t fragment, NodeId gone,
                 NodeId target, EntryId next, EntryId end);
  void heal_record(const std::shared_ptr<Healing>& h, LedgerId id, size_t fragment, NodeId gone, NodeId target);
  // Sends `entries` to `target` at once (a copy takes them in order) and
  // calls `done` with the first failure, or ok, once every one is answered;
  // entry `run_start` (the fragment's first) may start a run of its own there.
  // Striped, only the entries of `keep` go, with `stripe`.
  void send_copies(LedgerId id, NodeId target, EntryId lac, bool recovery, EntryId run_start,
                   std::shared_ptr<std::vector<storage::Entry>> entries, const Stripe& keep,
                   const std::optional<StripeInfo>& stripe, std::function<void(common::Status)> done);
  // The nodes of `candidates` that may take a copy of fragment `fragment`:
  // none of its own nodes, nor of an open ledger's last fragment (their
  // last run takes the writer's adds); in random order, those holding no
  // part of the ledger first.
  static std::vector<NodeId> copy_targets(const LedgerMeta& meta, size_t fragment, std::vector<NodeId> candidates);
  // Counts `bytes` copied and runs `next`, once the throttle allows when `throttled`.
  void after_copied(uint64_t bytes, bool throttled, runtime::Task next);
  void run_throttled();
  // Writes heal_status_ to kHealingKey: at once with `now`, else at most once a second.
  void publish_healing(bool now);

  Transport& transport_;
  metadata::Store& store_;
  storage::Storage& local_;
  const ReplicationSettings settings_;
  std::unordered_map<LedgerId, Ledger> ledgers_;  // transport reactor
  std::deque<LedgerId> cached_order_;             // records kept for reads, oldest first
  std::set<LedgerId> local_only_;                 // ledgers known to have no record
  uint64_t next_token_ = 1;
  std::function<bool()> heals_;
  std::unique_ptr<runtime::Timer> heal_timer_;
  std::unique_ptr<runtime::Timer> grace_timer_;   // a pass when a lost node's grace ends
  bool healing_ = false;                           // a pass is under way
  std::set<NodeId> draining_;                      // storage nodes being decommissioned
  metadata::WatchId draining_watch_ = 0;
  std::unordered_map<NodeId, int64_t> gone_since_ms_;  // storage nodes not live, since when
  HealingStatus heal_status_;                      // what kHealingKey says
  int64_t heal_published_ms_ = 0;                  // monotonic, of the last write
  std::string heal_published_;                     // ... and what it said, but its time
  int64_t throttle_since_ms_ = 0;                  // monotonic: the throttle's window starts
  uint64_t throttle_bytes_ = 0;                    // ... and what was copied since
  std::unique_ptr<runtime::Timer> throttle_timer_;
  std::deque<std::pair<int64_t, runtime::Task>> throttled_;  // copies waiting for the throttle, by when due
  bool stopped_ = false;                      // transport reactor
  std::atomic<bool> stop_requested_{false};   // any thread

  // Any thread: what ledger_info() and set_fsync() need without a hop.
  mutable std::mutex mu_;
  std::unordered_map<LedgerId, storage::LedgerInfo> info_;
  struct FsyncChoice {
    uint8_t mode = 255;
    uint32_t interval_ms = 0;
  };
  std::unordered_map<LedgerId, FsyncChoice> fsync_;
  std::unordered_map<LedgerId, std::shared_ptr<const Striping>> striping_;  // striped ledgers this node writes
  std::vector<NodeId> draining_copy_;

  common::Counter& ensemble_changes_;
  common::Counter& recoveries_;
  common::Counter& recovered_entries_;
  common::Counter& degraded_adds_;
  common::Counter& healed_fragments_;
  common::Counter& healed_entries_;
  common::Counter& healed_bytes_;
  common::Counter& moved_copies_;
  common::Gauge& underreplicated_;
};

}  // namespace magnetar::replication
