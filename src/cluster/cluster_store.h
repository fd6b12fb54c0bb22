// ClusterStore: the metadata::Store a cluster member's components use.
//
// Every call goes to the member's "cluster" reactor (a bounded mailbox: full
// answers ResourceExhausted). There the leader runs it on its RaftStore; any
// other member forwards it to the leader over the cluster port, and the
// leader answers it the same way. The answer is posted back to the reactor
// that made the call (store.h). Watches are local: every member applies the
// log, so its watches fire as it does.
//
// Leader changes are hidden where that is safe. A call that found no leader,
// or reached a member that no longer leads, changed nothing: it is tried
// again (the leader it names, or the next one elected) until
// kCallDeadlineMs has passed, then answered Unavailable. A write whose
// forwarded call got no reply may or may not have happened: it is answered
// Fenced, as the store contract says, and never retried here. Reads retry.
//
// Threads: calls from any thread; everything else on the cluster reactor.
#pragma once

#include <cstdint>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cluster/consensus.h"
#include "cluster/raft_store.h"
#include "cluster/rpc.h"
#include "cluster/store_machine.h"
#include "common/metrics.h"
#include "metadata/store.h"
#include "runtime/reactor.h"
#include "runtime/timer.h"

namespace magnetar::cluster {

// One metadata::Store call, as it is run locally or forwarded.
struct MetadataCall {
  enum class Kind : uint8_t { kGet = 0, kPut = 1, kDelete = 2, kListChildren = 3, kOpenSession = 4, kCloseSession = 5 };
  Kind kind = Kind::kGet;
  std::string key;
  std::string value;
  int64_t expected_version = metadata::kAnyVersion;
  metadata::SessionId session = 0;
  bool is_write() const { return kind != Kind::kGet && kind != Kind::kListChildren; }
  static MetadataCall of(Kind kind, std::string key = {}) {
    MetadataCall call;
    call.kind = kind;
    call.key = std::move(key);
    return call;
  }
};

// What the call returned: a status and, on success, its kind's result.
struct MetadataAnswer {
  common::Status status;
  metadata::Stat stat;             // get, put
  std::string value;               // get
  std::vector<std::string> children;  // list_children
  metadata::SessionId session = 0;  // open_session
  static MetadataAnswer of(common::Status status) {
    MetadataAnswer answer;
    answer.status = std::move(status);
    return answer;
  }
};

// The rpc.fbs encodings of both, for the kMetadata method.
std::string encode_metadata_call(const MetadataCall& call);
common::Result<MetadataCall> decode_metadata_call(std::string_view bytes);
std::string encode_metadata_answer(const MetadataAnswer& answer);
common::Result<MetadataAnswer> decode_metadata_answer(std::string_view bytes);

class ClusterStore final : public metadata::Store {
 public:
  static constexpr int64_t kCallDeadlineMs = 15000;
  static constexpr int64_t kRetryDelayMs = 50;
  // Calls waiting to be tried again (no leader, a lapsed lease) at most; more
  // are answered Unavailable at once rather than pile up for the deadline.
  static constexpr size_t kMaxWaiting = 16384;

  // Everything lives on `reactor` and outlives this store's last call.
  // `lease_valid` says whether this member's lease is current (node.h); while
  // it is not, writes wait (up to their deadline) instead of being sent.
  ClusterStore(runtime::Reactor& reactor, Consensus& consensus, StoreMachine& machine, RaftStore& local,
               RpcClient& rpc, std::function<bool()> lease_valid);

  void get(std::string key, metadata::Callback<common::Result<metadata::Record>> done) override;
  void put(std::string key, std::string value, metadata::PutOptions options,
           metadata::Callback<common::Result<metadata::Stat>> done) override;
  void del(std::string key, int64_t expected_version, metadata::StatusCallback done) override;
  void list_children(std::string key,
                     metadata::Callback<common::Result<std::vector<std::string>>> done) override;
  common::Result<metadata::WatchId> watch(std::string prefix, metadata::WatchCallback fn) override;
  void unwatch(metadata::WatchId id) override;
  void open_session(metadata::Callback<common::Result<metadata::SessionId>> done) override;
  void close_session(metadata::SessionId session, metadata::StatusCallback done) override;

  // Cluster reactor: runs `call` on this member's RaftStore (the leader's
  // side of a forwarded call; a member that is not the leader answers
  // Unavailable).
  void run_local(const MetadataCall& call, std::function<void(MetadataAnswer)> done);
  // Cluster reactor: no more calls are taken; the ones waiting for a leader
  // are answered Unavailable.
  void close();

 private:
  using Answer = std::function<void(MetadataAnswer)>;
  // Any thread: hands `call` to the cluster reactor; `done` runs on the caller's reactor.
  void submit(MetadataCall call, Answer done);
  // Cluster reactor: runs `call` where the leader is, retrying as described above.
  void execute(MetadataCall call, int64_t deadline_ms, Answer done);
  void retry_later(MetadataCall call, int64_t deadline_ms, Answer done, common::Status why);

  struct Waiting {
    MetadataCall call;
    int64_t deadline_ms;
    Answer done;
    common::Status why;
  };

  runtime::Reactor& reactor_;
  Consensus& consensus_;
  StoreMachine& machine_;
  RaftStore& local_;
  RpcClient& rpc_;
  std::function<bool()> lease_valid_;
  bool lease_lapsed_ = false;  // a write waited for the lease since it was last valid (cluster reactor)
  common::Counter* lease_waits_ = nullptr;
  std::atomic<bool> stopping_{false};
  // Calls waiting to be tried again, and the timer that tries them (cluster reactor).
  std::vector<Waiting> waiting_;
  std::unique_ptr<runtime::Timer> retry_timer_;
};

}  // namespace magnetar::cluster
