// LevelDbStore: the metadata store of a standalone node, in a LevelDB
// database on local disk.
//
// Every LevelDB call runs on one "metadata" WorkerThread; callers never block
// on it (see store.h for where callbacks run). Calls wait in one bounded FIFO
// queue (a full queue answers ResourceExhausted at once).
//
// Group commit: the thread takes every call queued meanwhile (at most
// max_group_calls / max_group_bytes) and runs them in queue order. Each write
// goes through StoreState::apply() (store_state.h), which takes an encoded
// WriteOp (the same bytes the replicated backend orders through its log) and
// checks it against the committed state plus the effects of the earlier
// writes of the group, so every op gets exactly the answer serial application
// would give; an op that fails its expectation fails alone and changes
// nothing. A read sees the committed state plus the earlier writes of the
// group. StoreState::commit() then writes
// the whole group as one LevelDB batch (one fdatasync), and only after it are
// the calls answered and watchers notified, in queue order: nobody ever sees
// a change that is not durable. When that write fails, every write of the
// group fails with its error and the group's reads are answered again from
// the committed state.
//
// Sessions live as long as this process: at start() the ephemeral keys of
// every earlier session are deleted, as a cluster would expire them.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "metadata/store.h"
#include "metadata/store_state.h"
#include "metadata/watchers.h"
#include "runtime/component.h"
#include "runtime/worker_thread.h"

namespace leveldb {
class Env;
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
    bool sync_writes = true;          // fdatasync each group before its calls are answered
    size_t max_group_calls = 1024;    // calls run together, written as one batch
    size_t max_group_bytes = 4 << 20; // encoded ops and keys of one group (one call may exceed it)
    leveldb::Env* env = nullptr;      // the file system LevelDB uses; null: the default (tests inject faults)
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
  using Applied = StoreState::Applied;
  // One call waiting for the metadata thread.
  struct Call {
    enum class Kind : uint8_t { kWrite, kGet, kList };
    // Answered on the calling thread's reactor (null when not a reactor).
    Call(Kind kind, std::string arg);
    Kind kind = Kind::kWrite;
    std::string arg;  // kWrite: the encoded WriteOp; otherwise the key
    runtime::Reactor* home = nullptr;
    std::chrono::steady_clock::time_point queued;
    std::function<void(const Applied&)> written;                // kWrite, run on home
    Callback<common::Result<Record>> got;                       // kGet
    Callback<common::Result<std::vector<std::string>>> listed;  // kList
  };

  // start(), on the metadata thread: opens the database, then removes the
  // ephemeral keys of earlier processes.
  common::Status open_db();

  // Queues `call`; on failure (full, stopped) returns the error and the call
  // is dropped unanswered.
  common::Status submit(Call call);
  // Metadata thread: runs groups of queued calls until the queue is empty.
  void drain();
  void run_group(std::vector<Call>& calls);

  const Options options_;
  std::unique_ptr<runtime::WorkerThread> thread_;
  std::atomic<bool> running_{false};

  std::mutex queue_mu_;
  std::deque<Call> queue_;  // at most options_.queue_capacity
  bool draining_ = false;   // a drain() is posted or running

  // Metadata thread only (and start() before the thread takes calls).
  StoreState state_;

  Watchers watchers_;

  common::Counter* writes_ = nullptr;
  common::Counter* failed_writes_ = nullptr;
  common::Histogram* write_latency_ = nullptr;
  common::Histogram* group_calls_ = nullptr;
};

}  // namespace magnetar::metadata
