// Producer deduplication: a SEND whose sequence id is not above the highest
// one already stored for its producer name is answered without storing it
// again (Pulsar's deduplicationEnabled policy).
//
// DedupState is the decision alone: per producer name, the highest sequence
// id pushed to the log (in flight or stored) and the highest persisted.
// Deduplication adds persistence: a snapshot of the persisted map in the
// metadata store (dedup.fbs), written every kSnapshotEvery stored entries
// and on close, and at load the entries after the snapshot are replayed from
// the log (every entry header names its producer and sequence id), so the
// state survives a restart or a crash.
//
// A message sent in chunks has one sequence id on every chunk: chunks before
// the last (MessageHeader::more_chunks) are stored without a look and
// recorded nowhere, and the message is judged and recorded by its last
// chunk, as Pulsar's MessageDeduplication does.
//
// Threads: both live on their topic's home reactor; callbacks run there.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "broker/naming.h"
#include "common/result.h"
#include "ledger/log.h"
#include "ledger/position.h"
#include "metadata/store.h"

namespace magnetar::broker {

enum class DedupVerdict {
  kNew,             // store it
  kDuplicate,       // stored before: answer with a receipt and store nothing
  kMaybeDuplicate,  // an earlier send with this id is still being stored: refuse, the client retries
};

struct DedupSnapshot {
  ledger::Position position;                // the last entry the map covers
  std::map<std::string, int64_t> sequences;  // producer name -> highest persisted sequence id
  bool operator==(const DedupSnapshot&) const = default;
};

std::string encode_dedup_snapshot(const DedupSnapshot& s);
// kCorruption for bytes that fail verification or come from a newer format.
common::Result<DedupSnapshot> decode_dedup_snapshot(std::string_view bytes);

class DedupState {
 public:
  // `highest` is the entry's highest sequence id (a batch's last message),
  // at least `sequence_id`.
  DedupVerdict check(const std::string& producer, int64_t sequence_id) const;
  // A kNew entry was handed to the log.
  void pushed(const std::string& producer, int64_t highest);
  // The log stored an entry of `producer` at `p` (also used when replaying).
  void persisted(const std::string& producer, int64_t highest, ledger::Position p);
  // A store failed: what was pushed but not persisted may be sent again.
  void forget_pushed(const std::string& producer);
  // The highest persisted sequence id of `producer`; -1 when none.
  int64_t last_sequence_id(const std::string& producer) const;

  DedupSnapshot snapshot() const;
  void restore(const DedupSnapshot& s);
  ledger::Position last_position() const { return last_position_; }
  size_t producers() const { return persisted_.size(); }

 private:
  std::map<std::string, int64_t> pushed_;
  std::map<std::string, int64_t> persisted_;
  ledger::Position last_position_{0, ledger::EntryId{-1}};
};

// The highest sequence id an entry carries: `highest_sequence_id` when the
// client sent one above `sequence_id`, else the last of the entry's
// `messages` consecutive ids.
int64_t highest_sequence_id(int64_t sequence_id, int64_t highest_sequence_id, uint32_t messages);

class Deduplication {
 public:
  static constexpr uint64_t kSnapshotEvery = 1000;  // stored entries between snapshots

  Deduplication(metadata::Store& store, std::string snapshot_key);
  ~Deduplication();

  DedupState& state() { return state_; }
  // Judge only producers whose names start with `prefix` (empty: every
  // producer): others are stored without a look and recorded nowhere.
  void set_only_prefix(std::string prefix) { only_prefix_ = std::move(prefix); }
  bool judges(std::string_view producer) const { return producer.starts_with(only_prefix_); }
  bool ready() const { return ready_; }

  // Loads the snapshot, then replays every entry of `log` after it.
  // REQUIRES: `log` outlives the recovery (the caller keeps its Topic alive
  // or ignores the answer).
  void recover(ledger::Log& log, ledger::Callback<common::Status> done);
  // Call after every stored entry: writes a snapshot every kSnapshotEvery.
  void on_persisted();
  // Writes a snapshot when entries were stored since the last one (the
  // broker's maintenance timer calls this, so an idle topic's next load
  // replays nothing).
  void snapshot_if_behind();
  // Writes a snapshot now (one write in flight; a later state follows it).
  void snapshot(ledger::Callback<common::Status> done);
  // Where topic `topic`'s snapshot is stored (dedup.fbs).
  static std::string snapshot_key(const TopicName& topic);
  // Deletes the stored snapshot (the topic is being deleted).
  static void remove(metadata::Store& store, const std::string& snapshot_key, ledger::Callback<common::Status> done);

 private:
  void replay(ledger::Log& log, ledger::Position after, ledger::Callback<common::Status> done);
  void write_snapshot();

  metadata::Store& store_;
  const std::string key_;
  DedupState state_;
  std::string only_prefix_;
  bool ready_ = false;
  uint64_t since_snapshot_ = 0;
  bool writing_ = false;
  bool again_ = false;
  std::vector<ledger::Callback<common::Status>> waiting_;  // for the write in flight or the next one
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace magnetar::broker
