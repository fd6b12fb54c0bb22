// RaftStore: metadata::Store replicated through a Consensus. Every member
// holds the whole key space in its own StoreMachine; writes are ordered by the
// log, so every member goes through the same states in the same order.
//
// Writes (put, del, open_session, close_session). The proposer fixes
// everything an op depends on (now_ms; session ids follow from the log order)
// in a WriteOp and proposes it; every member applies it; once it is applied
// here the caller is answered with the outcome this member's StoreMachine
// recorded for the entry's index, which is the answer every member computed.
// Closing a session deletes its ephemeral keys in the same entry, so every
// member drops them at the same point of the log.
//
// Reads (get, list_children) go through a consensus barrier and then read the
// local state: linearizable, they see every write acknowledged before the
// call. Only the leader can pass a barrier.
//
// Followers. A call on a member that is not the leader answers Unavailable at
// once, naming the leader when it is known ("not the leader; the leader is
// server 2 at 10.0.0.2:6660"), and changes nothing. Reads are refused too,
// rather than served stale from the local state: the Store contract promises
// callers the latest committed value (a broker deciding ownership must not act
// on an old one). ClusterStore (cluster_store.h) forwards calls to the leader;
// followers' watches fire as they apply the log.
//
// Errors beyond those of store.h: Unavailable (no leader, not the leader,
// shutting down: nothing changed) and Fenced (leadership was lost while the
// write was in flight: it may or may not be applied; a caller that retries a
// compare-and-set sees its own earlier success as a version mismatch).
//
// Sessions live until closed: expiry of a session whose owner is gone (leases
// held by the leader, renewed by the owner) is not built yet.
//
// Threads: every call, and every callback (answers, watch notifications),
// on the thread that drives the consensus: the test thread stepping libraft's
// fixture, or a node's "cluster" reactor, where ClusterStore is the front that
// takes calls from every other thread.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cluster/consensus.h"
#include "cluster/store_machine.h"
#include "metadata/store.h"
#include "metadata/write_op.h"

namespace magnetar::cluster {

class RaftStore final : public metadata::Store {
 public:
  // `consensus` applies its log to `machine`; both must outlive this store.
  RaftStore(Consensus& consensus, StoreMachine& machine);

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

 private:
  using Outcome = StoreMachine::Outcome;
  using Proposed = std::function<void(common::Result<Outcome>)>;

  // Proposes `op`; `done` gets the outcome applied at its index, or why the
  // proposal failed (mapped to this store's errors).
  void propose(const metadata::WriteOp& op, Proposed done);
  // Runs `read` after a barrier, or answers `failed` with why there was none.
  void after_barrier(std::function<void()> read, std::function<void(common::Status)> failed);
  // A consensus error as this store reports it.
  common::Status store_error(const common::Status& st, std::string_view what) const;

  Consensus& consensus_;
  StoreMachine& machine_;
};

}  // namespace magnetar::cluster
