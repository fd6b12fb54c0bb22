// Log: what a topic needs from its message log, persistent or not.
//
// ManagedLedger (managed_ledger.h) keeps entries in storage with durable
// cursors; NonPersistentLog (non_persistent_log.h) keeps the latest entries
// in a bounded memory ring and nothing on disk. The broker holds a Log and
// does not care which.
//
// Threads: every method on the log's home reactor; callbacks run there too.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "common/result.h"
#include "ledger/cursor.h"
#include "ledger/entry_codec.h"
#include "ledger/ledger_chain.h"
#include "ledger/position.h"

namespace magnetar::ledger {

struct LedgerEntry {
  Position position;
  MessageHeader header;
  common::Slice payload;
};

template <typename T>
using Callback = std::function<void(T)>;

// Where an added entry was stored, and the topic-wide index of its first
// message (the header.first_index the log gave it when the add was taken,
// which may be after add_entry returned: adds wait while a ledger rolls over).
struct AppendedEntry {
  Position position;
  int64_t first_index = -1;
};

class Log {
 public:
  virtual ~Log() = default;
  virtual const std::string& name() const = 0;

  // Appends one entry; header.first_index is assigned. Completes with the
  // entry's position and first index once stored. Adds complete in order.
  virtual void add_entry(MessageHeader header, common::Slice payload,
                         Callback<common::Result<AppendedEntry>> done) = 0;
  // Up to max_entries entries after `after` (fewer at a ledger's end or
  // when older ones are gone). An empty result when nothing follows yet.
  virtual void read_entries(Position after, size_t max_entries,
                            Callback<common::Result<std::vector<LedgerEntry>>> done) = 0;

  // The log as its compacted view shows it (topic compaction): while
  // `after` is before the view's horizon, the entries of the compacted
  // ledger after `after` (each at its position in the log, holding the
  // latest message of its keys), then the entries after the horizon. A log
  // without a compacted view reads as read_entries().
  virtual void read_compacted(Position after, size_t max_entries,
                              Callback<common::Result<std::vector<LedgerEntry>>> done) {
    read_entries(after, max_entries, std::move(done));
  }

  // Where a cursor created by open_cursor starts: after the last entry, or
  // before the first entry the log still holds.
  enum class CursorStart { kLatest, kEarliest };
  // Opens the cursor `name`, or creates it at `start`. An existing cursor
  // keeps its position whatever `start` says.
  virtual void open_cursor(std::string name, bool durable, CursorStart start,
                           Callback<common::Result<Cursor*>> done) = 0;
  void open_cursor(std::string name, bool durable, Callback<common::Result<Cursor*>> done) {
    open_cursor(std::move(name), durable, CursorStart::kLatest, std::move(done));
  }
  virtual Cursor* cursor(const std::string& name) = 0;
  virtual common::Status ack(const std::string& cursor, Position p) = 0;
  virtual common::Status ack_cumulative(const std::string& cursor, Position p) = 0;
  virtual common::Status ack_batch_index(const std::string& cursor, Position p, uint32_t index,
                                         uint32_t batch_size) = 0;
  // Moves cursor `name`'s mark-delete position to `mark_delete` (back or
  // forward), dropping every acknowledgement after it. Completes once the
  // new position is persisted (at once for a cursor that is not durable).
  // kNotFound for an unknown cursor.
  virtual void reset_cursor(const std::string& name, Position mark_delete, Callback<common::Status> done) = 0;
  // Marks durable cursor `name` replicated (or not), persisted with it;
  // kNotFound when unknown, kInvalidArgument for a log that keeps no cursor.
  virtual common::Status set_replicated(const std::string& name, bool on) {
    return common::Status::invalid_argument("only a persistent topic's subscription is replicated");
  }
  // Forgets cursor `name` and its persisted state; kNotFound when unknown.
  virtual void delete_cursor(const std::string& name, Callback<common::Status> done) = 0;
  // Every cursor the log has open, including durable cursors recovered when
  // the log was opened.
  virtual std::vector<std::string> cursor_names() const = 0;

  // The entries the log holds now, for backlog and positions.
  virtual const LedgerChain& chain() const = 0;
  Position last_confirmed() const { return chain().empty() ? Position{} : chain().last_position(); }
  // Where a cursor stands to read the log from its start: before the first
  // entry the log holds, or, for a log with a compacted view, before
  // everything (the view's entries may sit in ledgers since dropped).
  virtual Position before_first() const {
    return chain().empty() ? Position{} : Position{chain().ledgers().front().id, storage::kNoEntry};
  }
  virtual int64_t next_message_index() const = 0;
  // Entries found damaged on disk (failed their checksum, or lost) since the
  // log was opened: each is skipped for every reader and acknowledged for
  // every cursor, so that one bad record costs only itself.
  virtual uint64_t damaged_entries() const { return 0; }
  // True when nothing is under way: no add or cursor write in flight, no
  // add waiting. A log that is idle may be closed without making anyone wait.
  virtual bool idle() const { return true; }
  // Adds after it fail.
  virtual void close(Callback<common::Status> done) = 0;
};

}  // namespace magnetar::ledger
