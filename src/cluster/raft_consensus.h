// RaftConsensus: Consensus on Debian's libraft (canonical raft 0.15).
//
// libraft is a state machine driven by a `raft_io`: the I/O backend owns the
// event loop, the network and the disk, and calls into raft from that loop.
// Production uses raft_uv (libuv, files in the data directory); the unit tests
// use the in-memory io of libraft's fixture, which a test steps event by event.
//
// Ownership. create() owns its `struct raft`: close() shuts it down and the
// object may be destroyed once `closed` ran. A host that owns the raft instance
// itself (libraft's test fixture embeds one per server) builds the object with
// for_host(), passes fsm() to raft_init, then attach()es the initialized raft;
// that host closes the raft (after mark_closing()) before destroying this.
//
// Threads: every method, and every callback, on the thread that runs the
// raft_io's loop (see consensus.h). libraft itself is not thread-safe.
//
// libraft's C types stay out of this header: they are only named, never used.
#pragma once

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "cluster/consensus.h"

struct raft;
struct raft_fsm;
struct raft_io;

namespace magnetar::cluster {

class RaftConsensus final : public Consensus {
 public:
  // Owns a raft instance for server `id` at `address` over `io`, which must be
  // initialized and not used by another raft. `machine` must outlive this.
  static common::Result<std::unique_ptr<RaftConsensus>> create(raft_io* io, ServerId id, std::string_view address,
                                                                StateMachine& machine,
                                                                const ConsensusOptions& options);

  // For a host that initializes the raft instance itself; see the header comment.
  static std::unique_ptr<RaftConsensus> for_host(StateMachine& machine);
  // The callbacks to hand to raft_init. Valid as long as this object.
  raft_fsm* fsm();
  // Binds to `r`, initialized with fsm() and not yet started, and applies
  // `options` to it. REQUIRES: built by for_host(), not yet attached.
  void attach(raft* r, const ConsensusOptions& options);
  // The host is about to close the raft: requests it fails from now on complete
  // with kUnavailable (shutting down) instead of kFenced.
  void mark_closing();

  ~RaftConsensus() override;
  RaftConsensus(const RaftConsensus&) = delete;
  RaftConsensus& operator=(const RaftConsensus&) = delete;

  // Writes the first configuration of a new cluster to this member's log.
  // Every founding member bootstraps with the same `members` (or only one does,
  // and the others join through add_server). REQUIRES: before start(), on an
  // empty log; kFailedPrecondition otherwise.
  common::Status bootstrap(const std::vector<Server>& members);
  // Loads the log and the last snapshot (restore()), then takes part in the
  // cluster: applies what is committed, votes, stands for election.
  common::Status start();
  // Stops: pending requests complete with kUnavailable, then `closed` runs once
  // libraft released everything; only then may this object be destroyed.
  // REQUIRES: built by create(); called at most once.
  void close(std::function<void()> closed);

  ServerId id() const override;
  bool is_leader() const override;
  uint64_t term() const override;
  std::optional<Server> leader() const override;
  std::vector<Server> members() const override;
  LogIndex applied_index() const override;

  common::Status propose(std::string_view command, IndexCallback done) override;
  common::Status barrier(IndexCallback done) override;
  common::Status add_server(ServerId id, std::string_view address, Role role, DoneCallback done) override;
  common::Status assign_role(ServerId id, Role role, DoneCallback done) override;
  common::Status remove_server(ServerId id, DoneCallback done) override;
  common::Status transfer_leadership(ServerId to, DoneCallback done) override;

 private:
  struct Impl;
  explicit RaftConsensus(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace magnetar::cluster
