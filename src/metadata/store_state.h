// StoreState: the metadata key space in a LevelDB database, and the one
// deterministic path by which it changes. Both backends keep their state in
// one: LevelDbStore applies the WriteOps of its callers, a replicated backend
// applies the WriteOps its log orders, and every member that applies the same
// ops from the same state holds the same keys, versions and sessions.
//
// apply() checks an encoded WriteOp against the committed state plus the
// effects of the ops applied since the last commit() (the open group) and,
// when its expectation holds, adds its effects to the group; an op that fails
// changes nothing. Reads see the committed state plus the open group.
// commit() writes the group as one LevelDB batch. The outcome of an op depends
// on the op and the state only: never on the clock, the member or the disk
// (a failed commit() fails the whole group, which the owner must handle).
//
// Sessions and their ephemeral keys are state too: which sessions are open is
// kept in memory (a standalone process ends every session when it stops, see
// remove_stale_ephemerals()), and travels in snapshots.
//
// Threads: not thread-safe. One owner thread calls everything (LevelDbStore's
// metadata thread, or the thread that drives the consensus).
//
// LevelDB layout (records.fbs): "d" + key -> Node; "i" -> StoreInfo.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/metrics.h"
#include "common/result.h"
#include "metadata/store.h"
#include "metadata/write_op.h"

namespace leveldb {
class DB;
class Env;
class WriteBatch;
}

namespace magnetar::metadata {

class StoreState {
 public:
  struct Options {
    std::string path;             // the database directory, created when missing
    bool sync_writes = true;      // fdatasync every commit()
    leveldb::Env* env = nullptr;  // null: LevelDB's default file system
  };

  // What one WriteOp did.
  struct Applied {
    common::Result<Stat> result = common::Status::internal("not applied");
    SessionId session = 0;      // kOpenSession: the new id
    std::vector<Event> events;  // for watchers, once the change is committed
  };

  explicit StoreState(Options options);
  ~StoreState();
  StoreState(const StoreState&) = delete;
  StoreState& operator=(const StoreState&) = delete;

  // Opens the database (created when missing) and reads the store info. No
  // session is open afterwards.
  common::Status open();
  // Closes the database and forgets sessions and any open group.
  void close();
  bool is_open() const { return db_ != nullptr; }

  // Deletes the ephemeral keys every earlier process left behind: sessions
  // do not outlive the process that opened them. For a standalone store at
  // start-up; a replicated member gets its sessions from the log instead.
  common::Status remove_stale_ephemerals();

  // See the header comment. Never fails as a whole: a refused or malformed op
  // is an outcome.
  Applied apply(std::string_view encoded_op);
  // Writes the open group as one batch and makes it the committed state; on
  // failure drops it (the group's ops did not happen). Either way the group
  // is empty afterwards.
  common::Status commit();
  // The open group holds changes (reads made now see uncommitted effects).
  bool has_pending() const { return !group_.empty(); }

  // Reads of the committed state plus the open group.
  common::Result<Record> read_record(const std::string& key);
  common::Result<std::vector<std::string>> read_children(const std::string& key);

  // The whole committed state (every key, the store info, the open sessions)
  // as a Snapshot record (records.fbs). REQUIRES: no open group.
  common::Result<std::string> snapshot();
  // Replaces the whole state with a snapshot() of any member, as one batch,
  // and returns the changes that made: for each key that differs, one event
  // (kCreated, kModified with the new version, kDeleted), in key order. A
  // snapshot collapses history, so a key changed several times gives one
  // event. kCorruption when `bytes` is not a Snapshot: nothing changes then.
  // REQUIRES: no open group.
  common::Result<std::vector<Event>> restore(std::string_view bytes);

 private:
  // A key as the writes of the open group left it.
  struct StagedNode {
    bool committed = false;           // the key exists in the committed state
    SessionId committed_session = 0;  // its owner there (0: persistent or absent)
    std::optional<Stat> stat;         // now; nullopt: deleted
    std::string value;
  };
  // Effects of the writes applied since the last commit().
  struct Group {
    std::map<std::string, StagedNode, std::less<>> nodes;
    std::set<SessionId> opened;
    std::set<SessionId> closed;
    bool empty() const { return nodes.empty() && opened.empty() && closed.empty(); }
  };

  common::Result<Stat> apply_put(const WriteOp& op, Applied& applied);
  common::Result<Stat> apply_delete(const WriteOp& op, Applied& applied);
  common::Status apply_open_session(Applied& applied);
  common::Status apply_close_session(const WriteOp& op, Applied& applied);
  // The entry of `key` in the open group, made from its current state
  // (`exists`, `current`) on first use.
  StagedNode& stage(const std::string& key, bool exists, const Stat& current);

  // read_node answers NotFound when the key is absent.
  common::Status read_node(const std::string& key, Stat& stat, std::string* value);
  common::Status read_committed_node(const std::string& key, Stat& stat, std::string* value);
  bool session_open(SessionId session) const;
  SessionId last_session() const;
  std::vector<std::string> keys_of_session(SessionId session) const;

  common::Status read_info();
  std::string encode_info(SessionId last_session) const;
  // Writes `batch` (synced when options_.sync_writes).
  common::Status write_batch(leveldb::WriteBatch& batch, std::string_view what);

  const Options options_;
  std::unique_ptr<leveldb::DB> db_;
  SessionId last_session_ = 0;
  std::set<SessionId> open_sessions_;
  std::map<SessionId, std::set<std::string>> ephemeral_keys_;
  Group group_;

  common::Counter* reads_ = nullptr;
  common::Counter* write_batches_ = nullptr;
};

}  // namespace magnetar::metadata
