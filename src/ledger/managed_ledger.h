// ManagedLedger: a topic's log as a chain of storage ledgers, plus cursors.
//
// Entries are added to the last ledger of the chain; it rolls over to a new
// ledger by entry count, size or age. Opening a managed ledger seals the
// last ledger of the previous owner (storage close_ledger fences its writer)
// and starts a new one, so two owners can never both append. The old owner
// learns of it from its next add (kFenced) and stops for good: that add and
// every later one fail with kFenced, it starts no new ledger and never
// writes the chain again (its close flushes only the cursors), so the new
// owner's writes are never contested; its owner (the broker) closes the
// topic there and its clients look it up again. The chain
// (records.fbs LedgerList) and durable cursors (CursorState) live in the
// metadata store under /managed-ledgers/<name>; every write there is
// compare-and-set on the version this owner last wrote, so a second owner
// fails with kFailedPrecondition instead of overwriting.
//
// Every entry carries a MessageHeader (entry_codec.h) whose first_index is
// the topic-wide index of its first message, assigned here; seek by message
// index or by publish time is a binary search over entries.
//
// Retention: a ledger other than the current one is deleted once every
// durable cursor is past it and it is older than retention_time or beyond
// retention_size of newer data (-1 keeps it forever on that count).
//
// Rooms: managed_ledger.cc (open, adds, rollover, reads, close, delete), _cursors.cc (cursors, their
// persistence), _retention.cc (housekeeping, trim), _ttl.cc (TTL, expiry) and _seek.cc (seeks).
//
// Threads: open() must be called on a reactor (the home); every other method
// on that same reactor, and every callback runs there.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "common/fifo.h"
#include "common/result.h"
#include "ledger/add_timing.h"
#include "ledger/cursor.h"
#include "ledger/entry_codec.h"
#include "ledger/ledger_chain.h"
#include "ledger/ledger_ids.h"
#include "ledger/log.h"
#include "ledger/position.h"
#include "metadata/store.h"
#include "runtime/reactor.h"
#include "runtime/timer.h"
#include "storage/storage.h"

namespace magnetar::ledger {

struct ManagedLedgerConfig {
  EntryId max_entries_per_ledger = 50000;
  uint64_t max_ledger_bytes = 256u << 20;
  std::chrono::milliseconds max_ledger_age{std::chrono::hours(4)};
  std::chrono::milliseconds retention_time{0};  // -1: forever
  int64_t retention_size = 0;                   // bytes; -1: unlimited
  std::chrono::milliseconds ttl{0};             // 0: messages never expire
  // How the storage makes adds durable (Storage::set_fsync); nullopt: the
  // node's mode.
  std::optional<storage::FsyncMode> fsync;
  std::chrono::milliseconds fsync_interval{0};  // kInterval only
  // How many copies each new ledger gets where the storage keeps several
  // (the namespace's persistence policy; zeros: the storage's defaults).
  storage::LedgerOptions copies;
  // Recorded with a log this open creates and kept for its life; an
  // existing log keeps what it was made with (origin()). Its meaning is the
  // owner's (the broker: which protocol made the topic).
  uint8_t origin = 0;
};

// What housekeeping took away, for whoever keeps a record of it (message
// tracing). Each callback may be empty; they run on the home reactor.
struct LogObserver {
  // Cursor `cursor` skipped the entries after `after` through `last`
  // because they outlived a TTL or an expiry (acknowledged or not).
  std::function<void(const std::string& cursor, Position after, Position last)> expired;
  // Ledger `ledger` (all its entries) was removed by retention.
  std::function<void(LedgerId ledger)> removed;
};

// The compacted view of a log (records.fbs CompactedLedger): a storage
// ledger holding, in log order, the entries that carry the latest message of
// each key among those at or before `horizon`. What is in the entries is the
// broker's business (broker/compaction.h); each carries its position in the
// log (MessageHeader::origin_ledger/origin_entry).
struct CompactedLedger {
  LedgerId ledger = 0;
  EntryId entries = 0;
  uint64_t size = 0;          // payload bytes
  Position horizon;           // the last entry of the log it covers
  int64_t horizon_index = 0;  // index of the first message after the horizon
  int64_t first_index = 0;    // index of its first message (horizon_index when it holds none)
  int64_t created_ms = 0;
  bool operator==(const CompactedLedger&) const = default;
};

class ManagedLedger final : public Log, public std::enable_shared_from_this<ManagedLedger> {
 public:
  // `ids` hands out the ids of the ledgers it creates; all three outlive it.
  static void open(std::string name, ManagedLedgerConfig config, storage::Storage& storage,
                   metadata::Store& store, LedgerIdAllocator& ids,
                   Callback<common::Result<std::shared_ptr<ManagedLedger>>> done);
  // Payload bytes of the ledgers a stored ledger list (the record at
  // chain_key()) names: the size of a log nobody has open. A ledger left
  // open by a crash counts once recovery has closed it.
  static common::Result<uint64_t> stored_size(const std::string& record);
  // The storage ledgers a stored ledger list names.
  static common::Result<std::vector<LedgerId>> stored_ledgers(const std::string& record);
  // The origin a stored ledger list records (ManagedLedgerConfig.origin).
  static common::Result<uint8_t> stored_origin(const std::string& record);
  ManagedLedger(const ManagedLedger&) = delete;
  ManagedLedger& operator=(const ManagedLedger&) = delete;

  // Log. Reads return entries of one ledger at a time. An entry storage
  // cannot read back (kCorruption) is skipped: the read goes on after it,
  // and every cursor acknowledges it.
  void add_entry(MessageHeader header, common::Slice payload, Callback<common::Result<AppendedEntry>> done) override;
  void read_entries(Position after, size_t max_entries,
                    Callback<common::Result<std::vector<LedgerEntry>>> done) override;
  // A new durable cursor is persisted; a non-durable one lives in memory only.
  using Log::open_cursor;
  void open_cursor(std::string name, bool durable, CursorStart start,
                   Callback<common::Result<Cursor*>> done) override;
  Cursor* cursor(const std::string& name) override;
  // Completes once every durable cursor's latest state is in the metadata
  // store (or failed to get there).
  void flush_cursors(Callback<common::Status> done);
  // A durable cursor's change is persisted in the background, coalesced to
  // one metadata write in flight per cursor.
  common::Status ack(const std::string& cursor, Position p) override;
  common::Status ack_cumulative(const std::string& cursor, Position p) override;
  common::Status ack_batch_index(const std::string& cursor, Position p, uint32_t index,
                                 uint32_t batch_size) override;

  void reset_cursor(const std::string& name, Position mark_delete, Callback<common::Status> done) override;
  void delete_cursor(const std::string& name, Callback<common::Status> done) override;
  std::vector<std::string> cursor_names() const override;
  // Acknowledges, for cursor `name`, every entry published before
  // `before_ms` (wall clock, ms); persisted like an ack. kNotFound for an
  // unknown cursor.
  void expire_cursor(const std::string& name, int64_t before_ms, Callback<common::Status> done);
  // Deletes the whole log: its cursors and ledger list from the metadata
  // store, then its ledgers from storage. The log is closed afterwards,
  // whatever the outcome; ok once the metadata is gone.
  void delete_log(Callback<common::Status> done);
  // Entries added since this owner opened the log.
  uint64_t entries_added() const { return entries_added_; }
  // Wall clock (ms) at which the current ledger was created; 0 when none.
  int64_t current_ledger_created_ms() const { return chain_.empty() ? 0 : chain_.back().created_ms; }

  // What the log was made with (ManagedLedgerConfig.origin).
  uint8_t origin() const { return origin_; }
  // Retention and TTL for the housekeeping runs from now on (policies
  // changed while the log is open).
  void set_retention(std::chrono::milliseconds time, int64_t size, std::chrono::milliseconds ttl);
  std::chrono::milliseconds retention_time() const { return config_.retention_time; }
  // How adds are made durable from now on (ManagedLedgerConfig.fsync).
  void set_fsync(std::optional<storage::FsyncMode> mode, std::chrono::milliseconds interval);
  // The copies the next ledger gets (ManagedLedgerConfig.copies).
  void set_copies(const storage::LedgerOptions& copies) { config_.copies = copies; }
  int64_t retention_size() const { return config_.retention_size; }

  // Replaces the observer; an empty one stops the reports.
  void set_observer(LogObserver observer);

  // Deletes ledgers that no cursor needs and retention no longer holds.
  void trim(Callback<common::Status> done);
  // Deletes the closed ledgers whose messages are all below message index
  // `index`, whatever cursors and retention say (Kafka's DeleteRecords): a
  // cursor behind them moves to the first ledger left. Whole ledgers only,
  // and never the current one, so the log may still start below `index`.
  // Completes with the index of the first message the log holds afterwards.
  void delete_before(int64_t index, Callback<common::Result<int64_t>> done);
  // TTL: acknowledges, for every cursor behind it, each entry published
  // more than config.ttl ago. No-op when ttl is 0.
  void expire_messages(Callback<common::Status> done);
  // Housekeeping for the owner to run periodically: rolls an aged ledger
  // over even without new adds, expires messages, then trims.
  void maintain(Callback<common::Status> done);
  // Topic compaction (managed_ledger_compacted.cc). One compacted ledger is
  // written at a time: begin_compacted_ledger records its id with the log
  // before creating it, so one left by a crash is deleted when the log next
  // opens; kFailedPrecondition while another is under way.
  void begin_compacted_ledger(Callback<common::Status> done);
  // Appends one entry to the ledger begin_compacted_ledger made, in log
  // order; header.origin_ledger/origin_entry say where it sits in the log.
  // Up to kMaxCompactedInFlight adds may wait at once; more fail with
  // kResourceExhausted.
  static constexpr size_t kMaxCompactedInFlight = 256;
  void add_compacted_entry(const MessageHeader& header, common::Slice payload, Callback<common::Status> done);
  // Seals the ledger being written and makes it the log's compacted view
  // covering the log through `horizon` (whose next message index is
  // `horizon_index`), by one compare-and-set of the ledger list; the
  // previous compacted ledger is deleted afterwards. With `drop_covered`,
  // the closed ledgers wholly at or before the horizon leave the log in the
  // same write (the view replaces them); cursors stay where they are, and
  // read_compacted serves them.
  void install_compacted_ledger(Position horizon, int64_t horizon_index, bool drop_covered,
                                Callback<common::Status> done);
  // Seals the current ledger and starts the next now, whatever its size or
  // age, so that a horizon at its end leaves it wholly behind (a compact
  // topic's pass drops such ledgers). No-op when it holds no entry or is
  // not taking adds.
  void roll_over_now();
  // Deletes the ledger begin_compacted_ledger made and forgets it.
  void abandon_compacted_ledger(Callback<common::Status> done);
  const std::optional<CompactedLedger>& compacted() const { return compacted_; }
  Position before_first() const override { return compacted_ ? Position{} : Log::before_first(); }
  bool compacting() const { return compacting_.active; }
  // Log: the compacted view.
  void read_compacted(Position after, size_t max_entries,
                      Callback<common::Result<std::vector<LedgerEntry>>> done) override;
  // The view from the entry holding message `index` (or the first after it
  // that the view holds), as read_compacted: up to max_entries entries.
  void read_compacted_from_index(int64_t index, size_t max_entries,
                                 Callback<common::Result<std::vector<LedgerEntry>>> done);
  // The first message index the compacted view holds (the log's first when
  // there is no view).
  int64_t compacted_first_index() const;

  // The entry holding message `index`, or the first entry published at or
  // after `time_ms`; kNotFound past the end.
  void seek_by_index(int64_t index, Callback<common::Result<Position>> done);
  void seek_by_time(int64_t time_ms, Callback<common::Result<Position>> done);

  const std::string& name() const override { return name_; }
  const LedgerChain& chain() const override { return chain_; }
  int64_t next_message_index() const override { return next_index_; }
  uint64_t damaged_entries() const override { return damaged_entries_; }
  bool idle() const override;
  // Seals the current ledger and flushes the cursors.
  void close(Callback<common::Status> done) override;
  common::Status set_replicated(const std::string& name, bool on) override;

 private:
  ManagedLedger(std::string name, ManagedLedgerConfig config, storage::Storage& storage, metadata::Store& store,
                LedgerIdAllocator& ids);
  struct PendingAdd {
    MessageHeader header;
    common::Slice payload;
    Callback<common::Result<AppendedEntry>> done;
    int64_t accepted_ns = 0;
  };
  // An add handed to storage: kept to hand it again when storage's queue
  // was full (the entry is not taken then, nor any after it).
  struct SubmittedAdd {
    EntryId entry = 0;
    common::Slice bytes;  // the encoded entry
    uint64_t size = 0;    // payload bytes
    uint32_t messages = 1;
    int64_t first_index = 0;
    Callback<common::Result<AppendedEntry>> done;
    AddTiming timing;  // for the callback (add_timing.h)
  };
  struct CursorSlot {
    Cursor cursor;
    int64_t version = metadata::kMustNotExist;
    bool writing = false;
    bool dirty = false;
    std::vector<Callback<common::Status>> flushed{};  // waiting for the writes to settle
  };
  // kBackingOff: storage's queue was full; adds wait and are handed again
  // shortly, in order, to the same ledger. kTakenOver: another writer fenced
  // the current ledger (a new owner opened the log); adds fail with kFenced.
  enum class State { kOpening, kReady, kRolling, kBackingOff, kTakenOver, kClosed };

  void recover(Callback<common::Status> done);
  // Loads every durable cursor persisted under the log.
  void recover_cursors(Callback<common::Status> done);
  // Acknowledges through the last entry published before `before_ms` for
  // each cursor `pick` accepts.
  void expire_before(int64_t before_ms, std::function<bool(const std::string&)> pick, Callback<common::Status> done);
  // Completes once cursor `name`'s latest state has settled in the store.
  void when_persisted(const std::string& name, Callback<common::Status> done);
  void start_new_ledger(Callback<common::Status> done);
  // Writes the chain as it stands. One write at a time (a rollover and a
  // trim may both change it): calls made during a write are answered by
  // the next one, which carries every change so far.
  void persist_chain(Callback<common::Status> done);
  // Drops the first `count` ledgers of the chain, persists it, then deletes
  // them from storage. REQUIRES: count < the number of ledgers.
  void drop_front_ledgers(size_t count, Callback<common::Status> done);
  void write_chain();
  void submit(PendingAdd add);
  void send(SubmittedAdd add);
  void on_added(SubmittedAdd add, LedgerId ledger, common::Status st);
  // Storage's queue is full: hands the held adds again after a back-off.
  void back_off();
  void resume_after_back_off();
  void maybe_roll_over();
  void roll_over();
  // Runs once the current ledger has no add in flight: seals it, starts the next.
  void finish_roll_over();
  void fail_waiting(const common::Status& st);
  // Another writer fenced the current ledger: kTakenOver from now on, and
  // the adds held here fail with taken_over_status().
  void taken_over(const common::Status& why);
  common::Status taken_over_status() const;
  // Entry p cannot be read back: counted once, acknowledged for every cursor.
  void skip_damaged(Position p, const common::Status& why);
  // Runs `fn` on the home reactor after the current call returns.
  void later(runtime::Task fn);
  void persist_cursor(const std::string& name);
  void seek(std::function<bool(const MessageHeader&)> at_or_after, Callback<common::Result<Position>> done);
  Position position_of(uint64_t ordinal) const;
  // Entries before p in the chain. REQUIRES: chain_.contains(p).
  uint64_t ordinal_of(Position p) const;
  static int64_t now_ms();
  // Compacted ledger entry `first` and up to max_entries - 1 after it, as
  // entries of the log; then, past its end, the log after the horizon.
  void read_compacted_at(EntryId first, size_t max_entries, Callback<common::Result<std::vector<LedgerEntry>>> done);
  // The first compacted entry for which `at_or_after` holds (entries order
  // by it), by a binary search of single-entry reads; `entries` when none.
  void find_compacted(std::function<bool(const MessageHeader&)> at_or_after, Callback<common::Result<EntryId>> done);
  // Deletes a compacted ledger that is no longer named (in the background).
  void delete_compacted_ledger(LedgerId id);
  std::string encode_list() const;
  std::string chain_key() const { return "/managed-ledgers/" + name_; }
  std::string cursor_key(const std::string& cursor) const { return chain_key() + "/cursors/" + cursor; }
  void check_home() const;

  const std::string name_;
  ManagedLedgerConfig config_;
  storage::Storage& storage_;
  metadata::Store& store_;
  LedgerIdAllocator& ids_;
  runtime::Reactor* home_ = nullptr;

  State state_ = State::kOpening;
  uint8_t origin_ = 0;
  bool chain_writing_ = false;
  bool sealing_ = false;     // finish_roll_over is under way
  // finish_roll_over sealed the current ledger and could not start the next:
  // its adds fail kFenced until the next rollover, and that is no takeover.
  bool writer_sealed_ = false;
  LedgerChain chain_;
  int64_t chain_version_ = metadata::kMustNotExist;
  std::vector<Callback<common::Status>> chain_waiters_;  // for the next chain write
  storage::LedgerWriter writer_;
  EntryId next_entry_ = 0;   // next id to add in the current ledger
  uint64_t current_bytes_ = 0;  // bytes submitted to the current ledger
  size_t in_flight_ = 0;     // adds submitted to the current ledger, not completed
  int64_t next_index_ = 0;   // topic-wide index of the next message
  uint64_t entries_added_ = 0;
  uint64_t damaged_entries_ = 0;
  std::map<std::string, CursorSlot> cursors_;
  std::optional<CompactedLedger> compacted_;
  // The compacted ledger being written (begin_compacted_ledger).
  struct CompactingLedger {
    bool active = false;   // begun, not yet installed or abandoned
    storage::LedgerWriter writer;
    LedgerId ledger = 0;   // recorded in the list; 0: none
    EntryId next_entry = 0;
    uint64_t size = 0;
    int64_t first_index = -1;
    size_t in_flight = 0;
    common::Status failed;  // the first add that failed fails the ledger
  };
  CompactingLedger compacting_;
  // Where sequential compacted reads go on: the last position a compacted
  // read returned -> the compacted entry after it (bounded).
  std::map<Position, EntryId> compacted_hints_;
  // What few managed ledgers need, made on first use (cold()): a loaded
  // idle topic carries one null pointer for it.
  struct Cold {
    common::Fifo<PendingAdd> waiting;  // adds held while opening, rolling over or backing off
    std::set<Position> damaged;  // found so far (bounded by kMaxDamagedRemembered)
    common::Fifo<SubmittedAdd> refused;  // adds storage refused for a full queue, in entry order
    std::chrono::milliseconds back_off{0};
    std::unique_ptr<runtime::Timer> back_off_timer;
    LogObserver observer;
  };
  Cold& cold() {
    if (!cold_) cold_ = std::make_unique<Cold>();
    return *cold_;
  }
  bool has_refused() const { return cold_ && !cold_->refused.empty(); }
  std::unique_ptr<Cold> cold_;
};

}  // namespace magnetar::ledger
