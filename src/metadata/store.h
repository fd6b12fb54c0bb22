// metadata::Store: everything that must survive a restart and be agreed on
// by a cluster (tenants, namespaces, policies, partition counts, ledger lists,
// ownership) lives behind this one interface.
//
// Keys are paths: "/admin/tenants/public". A key has a value (opaque bytes,
// usually a FlatBuffers record) and a version: 1 when created, +1 on every
// put. The key space is flat: a key's parents need not exist, and
// list_children("/a") names the next segment of every key under "/a/".
//
// Writes are compare-and-set on the version. Ephemeral keys belong to a
// session and disappear when it closes (or when the process that opened it is
// gone). Watches notify changes under a key prefix.
//
// Threads: every call is non-blocking and may come from any thread. A
// callback runs on the reactor that made the call, or on the store's own
// thread when the caller is not a reactor (main, a worker thread). A callback
// must not block. A call made after stop() completes with Unavailable.
//
// Backends: LevelDbStore (standalone, leveldb_store.h) and cluster::RaftStore
// (cluster/raft_store.h), which orders the same WriteOps through Raft and
// applies them to the same StoreState (store_state.h) on every member. A
// replicated backend also answers Unavailable (no leader, or this member is
// not it: nothing changed) and Fenced (leadership lost mid-write: the outcome
// is unknown).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/status.h"

namespace magnetar::metadata {

using SessionId = uint64_t;
using WatchId = uint64_t;

// Expected versions for put() and del().
inline constexpr int64_t kAnyVersion = -1;    // unconditional
inline constexpr int64_t kMustNotExist = 0;   // create only

struct Stat {
  int64_t version = 0;
  int64_t created_ms = 0;
  int64_t modified_ms = 0;
  SessionId session = 0;  // 0: persistent
  bool ephemeral() const { return session != 0; }
};

struct Record {
  std::string key;
  std::string value;
  Stat stat;
};

struct PutOptions {
  // kAnyVersion, kMustNotExist, or the version the key must be at now.
  int64_t expected_version = kAnyVersion;
  // Non-zero: the key is ephemeral and owned by this open session.
  SessionId session = 0;
};

enum class EventType { kCreated, kModified, kDeleted };

struct Event {
  EventType type;
  std::string key;
  int64_t version = 0;  // after the change; 0 for kDeleted
};

template <typename T>
using Callback = std::function<void(T)>;
using StatusCallback = std::function<void(common::Status)>;
using WatchCallback = std::function<void(const Event&)>;

class Store {
 public:
  virtual ~Store() = default;

  // The record, or NotFound.
  virtual void get(std::string key, Callback<common::Result<Record>> done) = 0;

  // Creates or replaces `key`. Fails with AlreadyExists when
  // kMustNotExist and the key exists, NotFound when a version > 0 is expected
  // and the key is absent, FailedPrecondition when the version differs or the
  // session is not open, InvalidArgument for a malformed key. Nothing changes
  // on failure.
  virtual void put(std::string key, std::string value, PutOptions options,
                   Callback<common::Result<Stat>> done) = 0;

  // Removes `key` (expected_version as for put). NotFound when absent.
  virtual void del(std::string key, int64_t expected_version, StatusCallback done) = 0;

  // Sorted names of the direct children of `key` ("/" for the root). An
  // empty list when there are none; never NotFound.
  virtual void list_children(std::string key, Callback<common::Result<std::vector<std::string>>> done) = 0;

  // Calls `fn` for every change of a key that starts with `prefix`, after the
  // change is durable, in the order changes were applied. Delivery follows
  // the callback rule above, fixed by the thread that called watch().
  virtual common::Result<WatchId> watch(std::string prefix, WatchCallback fn) = 0;
  // After unwatch returns, no new notification for `id` is queued.
  virtual void unwatch(WatchId id) = 0;

  // A session owns ephemeral keys. Closing it deletes them (one event each).
  virtual void open_session(Callback<common::Result<SessionId>> done) = 0;
  virtual void close_session(SessionId session, StatusCallback done) = 0;
};

// Checks that `key` is a path: starts with '/', no empty segment, no
// trailing '/', no NUL byte. "/" alone is valid only for list_children.
common::Status validate_key(std::string_view key);

}  // namespace magnetar::metadata
