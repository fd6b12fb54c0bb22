// LevelDbStore: the metadata store of a standalone node, in a LevelDB
// database on local disk.
//
// Every LevelDB call runs on one "metadata" WorkerThread; callers never block
// on it (see store.h for where callbacks run). Every change goes through
// apply(), which takes an encoded WriteOp: the same bytes a Raft-replicated
// backend would order through its log before applying them on each replica.
//
// Sessions live as long as this process: at start() the ephemeral keys of
// every earlier session are deleted, as a cluster would expire them.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "metadata/store.h"
#include "metadata/write_op.h"
#include "runtime/component.h"
#include "runtime/worker_thread.h"

namespace leveldb {
class DB;
class WriteBatch;
}

namespace magnetar::runtime {
class Reactor;
}

namespace magnetar::metadata {

class LevelDbStore final : public Store, public runtime::Component {
 public:
  struct Options {
    std::string path;                 // the database directory, created when missing
    size_t queue_capacity = 1 << 14;  // calls waiting for the thread before ResourceExhausted
    bool sync_writes = true;          // fdatasync each write before it is acknowledged
  };

  explicit LevelDbStore(Options options);
  ~LevelDbStore() override;  // stops

  // Component: start() opens the database (blocking, main thread) and removes
  // ephemeral keys left by an earlier process. stop() finishes queued calls
  // and closes the database; calls after it answer Unavailable.
  std::string_view name() const override { return "metadata"; }
  common::Status start() override;
  void stop() override;

  void get(std::string key, Callback<common::Result<Record>> done) override;
  void put(std::string key, std::string value, PutOptions options,
           Callback<common::Result<Stat>> done) override;
  void del(std::string key, int64_t expected_version, StatusCallback done) override;
  void list_children(std::string key, Callback<common::Result<std::vector<std::string>>> done) override;
  common::Result<WatchId> watch(std::string prefix, WatchCallback fn) override;
  void unwatch(WatchId id) override;
  void open_session(Callback<common::Result<SessionId>> done) override;
  void close_session(SessionId session, StatusCallback done) override;

 private:
  struct Applied {
    common::Result<Stat> result = common::Status::internal("not applied");
    SessionId session = 0;  // kOpenSession: the new id
  };
  struct Watcher {
    std::string prefix;
    WatchCallback fn;
    runtime::Reactor* home = nullptr;
  };

  // Metadata thread only. The one path by which stored state changes: checks
  // the op's expectation against the current state, writes the change in one
  // LevelDB batch, then notifies watchers. Nothing changes on failure.
  Applied apply(std::string_view encoded_op);
  common::Result<Stat> apply_put(const WriteOp& op);
  common::Result<Stat> apply_delete(const WriteOp& op);
  common::Status apply_close_session(const WriteOp& op);
  // Reads the node at `key` (NotFound when absent). Metadata thread only.
  common::Status read_node(const std::string& key, Stat& stat, std::string* value);
  common::Status write_info();
  // Writes `batch` (synced when options_.sync_writes). Metadata thread only.
  common::Status write_batch(leveldb::WriteBatch& batch, std::string_view what);
  common::Status remove_stale_ephemerals();
  void notify(std::vector<Event> events);

  // Queues `work` on the metadata thread; on failure (full, stopped) returns
  // the error and `work` is dropped.
  common::Status submit(std::function<void()> work);
  // Runs `fn` on `home`, or right here when home is null.
  static void deliver(runtime::Reactor* home, std::function<void()> fn);

  const Options options_;
  std::unique_ptr<runtime::WorkerThread> thread_;
  std::atomic<bool> running_{false};

  // Metadata thread only (and start() before the thread takes calls).
  std::unique_ptr<leveldb::DB> db_;
  SessionId last_session_ = 0;
  std::set<SessionId> open_sessions_;
  std::map<SessionId, std::set<std::string>> ephemeral_keys_;
  std::vector<Event> pending_events_;

  std::mutex watch_mu_;
  std::map<WatchId, Watcher> watchers_;
  WatchId next_watch_ = 1;

  common::Counter* writes_ = nullptr;
  common::Counter* reads_ = nullptr;
  common::Counter* failed_writes_ = nullptr;
  common::Counter* write_batches_ = nullptr;
  common::Histogram* write_latency_ = nullptr;
};

}  // namespace magnetar::metadata
