// NonPersistentLog: a Log that keeps the latest entries in a bounded memory
// ring and writes nothing to disk.
//
// The log is one pseudo-ledger (kLedgerId) whose entry ids keep growing;
// the ring holds the newest entries within capacity (entries and bytes).
// An entry pushed out of the ring is gone: cursors behind it are moved past
// it (a slow reader loses messages, as non-persistent topics promise), and
// reads start at the oldest entry still held. Cursors are never persisted.
//
// Threads: construct on the home reactor; every method there. Callbacks
// run there, after the call returns.
#pragma once

#include <deque>
#include <map>
#include <string>

#include "ledger/log.h"
#include "runtime/reactor.h"

namespace magnetar::ledger {

class NonPersistentLog final : public Log {
 public:
  static constexpr LedgerId kLedgerId = 1;

  NonPersistentLog(std::string name, size_t max_entries, size_t max_bytes);

  const std::string& name() const override { return name_; }
  void add_entry(MessageHeader header, common::Slice payload, Callback<common::Result<AppendedEntry>> done) override;
  void read_entries(Position after, size_t max_entries,
                    Callback<common::Result<std::vector<LedgerEntry>>> done) override;
  using Log::open_cursor;
  void open_cursor(std::string name, bool durable, CursorStart start,
                   Callback<common::Result<Cursor*>> done) override;
  Cursor* cursor(const std::string& name) override;
  common::Status ack(const std::string& cursor, Position p) override;
  common::Status ack_cumulative(const std::string& cursor, Position p) override;
  common::Status ack_batch_index(const std::string& cursor, Position p, uint32_t index,
                                 uint32_t batch_size) override;
  void reset_cursor(const std::string& name, Position mark_delete, Callback<common::Status> done) override;
  void delete_cursor(const std::string& name, Callback<common::Status> done) override;
  std::vector<std::string> cursor_names() const override;
  const LedgerChain& chain() const override { return chain_; }
  int64_t next_message_index() const override { return next_index_; }
  void close(Callback<common::Status> done) override;

  // The oldest entry id still held (== next id when empty).
  EntryId first_held() const { return first_held_; }
  size_t held_bytes() const { return bytes_; }

 private:
  void later(runtime::Task fn);
  void evict();

  const std::string name_;
  const size_t max_entries_;
  const size_t max_bytes_;
  runtime::Reactor* home_;
  LedgerChain chain_;  // one ledger: kLedgerId, entries = every id ever added
  std::deque<LedgerEntry> ring_;
  EntryId first_held_ = 0;
  size_t bytes_ = 0;
  int64_t next_index_ = 0;
  bool closed_ = false;
  std::map<std::string, Cursor> cursors_;
};

}  // namespace magnetar::ledger
