// Consensus: a replicated log of opaque commands, applied in the same order
// on every member of a cluster.
//
// The owner supplies a StateMachine; a command proposed on the leader is
// appended to the log, replicated, and once a majority of voters hold it
// (committed) every member applies it to its own StateMachine, in log order.
// The replicated metadata store orders its WriteOps through this interface.
//
// Threads: a Consensus lives on one thread, the one that drives its event
// loop. Every method must be called there, and every callback (StateMachine
// methods, propose/barrier/membership/transfer completions) runs there. A
// callback never runs inline inside the call that registered it; a request the
// consensus refuses at once is answered by the returned Status instead, and
// then its callback is never called.
//
// Errors (common::Status codes), the same for every call that takes a callback:
//   kFailedPrecondition  this member is not the leader (or is handing its
//                        leadership over). Nothing was appended: retry on the
//                        leader, which leader() names when it is known.
//   kFenced              leadership was lost before the request completed. The
//                        outcome is unknown: the entry may still commit under
//                        the next leader. A command must therefore be safe to
//                        apply even when its proposer was told it failed (the
//                        metadata store's WriteOps carry their expected versions).
//   kUnavailable         the consensus is shutting down, or a membership change
//                        is already in progress (retry once it completes).
//   kInvalidArgument / kNotFound / kAlreadyExists
//                        a membership request names an unknown or duplicate
//                        server, or a role it already has.
//   kIoError / kCorruption / kResourceExhausted / kInternal
//                        the log's storage failed, or memory ran out.
//
// Backends: RaftConsensus (raft_consensus.h, Debian's libraft). Nothing in
// this header depends on it, so another Raft library can replace it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/status.h"

namespace magnetar::cluster {

// A member's id: non-zero, unique in the cluster, never reused.
using ServerId = uint64_t;
// A position in the log. The first entry is 1; 0 means "none".
using LogIndex = uint64_t;

enum class Role : uint8_t {
  kVoter,    // holds the log and counts for the majority and elections
  kStandby,  // holds the log, does not vote: a warm spare or a voter-to-be
  kSpare,    // in the configuration only: holds no log
};

std::string_view role_name(Role role);

struct Server {
  ServerId id = 0;
  std::string address;  // how the other members reach it (transport-defined)
  Role role = Role::kVoter;
  bool operator==(const Server&) const = default;
};

struct ConsensusOptions {
  // A follower that hears no leader for this long (randomized between 1x and
  // 2x) starts an election; a leader that hears no majority for this long
  // steps down.
  unsigned election_timeout_ms = 1000;
  // An idle leader sends heartbeats this often. Well below the election timeout.
  unsigned heartbeat_timeout_ms = 100;
  // Take a snapshot after this many entries were applied since the last one.
  unsigned snapshot_threshold = 1024;
  // Entries kept in the log behind a snapshot, so a follower that lags by less
  // than this catches up from the log instead of receiving the whole snapshot.
  unsigned snapshot_trailing = 128;
  // Ask for votes in a pre-vote round first, so a member cut off and
  // reconnecting does not depose a healthy leader by bumping the term.
  bool pre_vote = true;
};

// The owner's replicated state. Runs on the consensus thread and must not block
// for long: the consensus makes no progress while it runs.
class StateMachine {
 public:
  virtual ~StateMachine() = default;

  // Applies the committed command at `index`; `command` is valid during the
  // call only. Called in log order, once per index, on every member; all members start from the same state, so they
  // reach the same state. Deterministic: it depends on `command` and the state
  // only (never on the clock or the member). A command the state rejects (a
  // stale version) is an outcome recorded by the owner, not a failure. A member
  // that cannot apply at all (its disk failed) must stop: skipping a command
  // would make it diverge from the others.
  virtual void apply(LogIndex index, std::string_view command) = 0;

  // The whole state as of the last applied command, in a form restore() reads
  // on any member.
  virtual std::string snapshot() = 0;

  // Replaces the whole state with `bytes` from snapshot() on some member; the
  // next apply() continues after the snapshot's last command. kCorruption when
  // the bytes cannot be read: the state is then left as it was and the
  // snapshot is refused (the leader sends it again).
  virtual common::Status restore(std::string_view bytes) = 0;
};

class Consensus {
 public:
  // The index of the entry once it is committed and applied on this member, or
  // an error (see the header comment).
  using IndexCallback = std::function<void(common::Result<LogIndex>)>;
  using DoneCallback = std::function<void(common::Status)>;

  virtual ~Consensus() = default;

  virtual ServerId id() const = 0;
  virtual bool is_leader() const = 0;
  // The latest term this member has seen (0 before it started): a leader
  // that lost its leadership and won it back leads in a later term.
  virtual uint64_t term() const = 0;
  // The leader this member knows of; nullopt while there is none (an election
  // is running) or this member has not heard from it yet. On the leader, itself.
  virtual std::optional<Server> leader() const = 0;
  // The latest configuration this member knows, committed or not.
  virtual std::vector<Server> members() const = 0;
  // The index of the last entry applied here: a command handed to the
  // StateMachine, or a later entry that carries none (a barrier, a membership
  // change, the end of a restored snapshot). Inside a propose callback it is at
  // least that command's index.
  virtual LogIndex applied_index() const = 0;

  // Appends a copy of `command` (non-empty) to the log. `done` runs once it is
  // committed and applied here, with its index. REQUIRES: this member is the
  // leader, otherwise kFailedPrecondition at once.
  virtual common::Status propose(std::string_view command, IndexCallback done) = 0;

  // A linearizable read point: `done` runs once every command committed before
  // the call is applied here, and this member was still the leader after the
  // call (a deposed leader cannot pass its barrier). Reads of the StateMachine
  // made in `done` see every write acknowledged before barrier() was called.
  virtual common::Status barrier(IndexCallback done) = 0;

  // Membership. One change at a time; each is itself a log entry, and `done`
  // runs once it is committed. REQUIRES: called on the leader.
  //
  // Adds a server that is not yet a member with `role`: two changes, an add
  // (as a spare) then an assign, and `done` runs after the second. A voter is
  // promoted only once it has caught up with the log, so the majority does not
  // grow by a member that cannot acknowledge entries yet.
  virtual common::Status add_server(ServerId id, std::string_view address, Role role, DoneCallback done) = 0;
  // Changes a member's role (standby -> voter is a promotion: the leader waits
  // until the member has caught up, or fails the change if it cannot).
  virtual common::Status assign_role(ServerId id, Role role, DoneCallback done) = 0;
  // Removes a member. Removing the leader itself makes it step down once the
  // change is committed.
  virtual common::Status remove_server(ServerId id, DoneCallback done) = 0;

  // Hands leadership to voter `to` (0: the most up-to-date voter). `done` runs
  // with ok once `to` leads, or kTimeout when it did not take over within an
  // election timeout (this member may then still be the leader).
  virtual common::Status transfer_leadership(ServerId to, DoneCallback done) = 0;
};

}  // namespace magnetar::cluster
