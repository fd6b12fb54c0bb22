// FixtureCluster: RaftConsensus members on libraft's deterministic in-memory
// fixture (raft/fixture.h). One thread; time is the fixture's, advanced one
// event (a tick, a message delivery, a disk write) per step, so every wait is a
// bounded number of steps and a run is the same on any machine.
//
// LogMachine: a state machine that appends every command to a list; its
// snapshot is the list, so members can be compared entry by entry. It is the
// members' machine unless the cluster is given a MachineFactory.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/consensus.h"
#include "cluster/libraft.h"
#include "cluster/raft_consensus.h"

extern "C" {
#include <raft/fixture.h>
}

namespace magnetar::cluster::testing {

class LogMachine : public StateMachine {
 public:
  void apply(LogIndex index, std::string_view command) override;
  std::string snapshot() override;
  common::Status restore(std::string_view bytes) override;

  std::vector<std::string> commands;
  LogIndex last_index = 0;
  bool out_of_order = false;  // an apply came with an index not above the last one
  int snapshots = 0;
  int restores = 0;
};

// Enough steps for any election or catch-up in these tests; a wait that needs
// more is a failure, not a slow machine.
inline constexpr unsigned kMaxSteps = 20000;

class FixtureCluster {
 public:
  // Makes the state machine of member `i`.
  using MachineFactory = std::function<std::unique_ptr<StateMachine>(unsigned i)>;

  // `voters` members, bootstrapped with all of them as voters, and started.
  // Without `make`, every member gets a LogMachine.
  explicit FixtureCluster(unsigned voters, const ConsensusOptions& options = {}, MachineFactory make = {});
  ~FixtureCluster();
  FixtureCluster(const FixtureCluster&) = delete;
  FixtureCluster& operator=(const FixtureCluster&) = delete;

  unsigned size() const { return static_cast<unsigned>(nodes_.size()); }
  RaftConsensus& node(unsigned i) { return *nodes_[i]; }
  // REQUIRES: the members' machines are LogMachines (no MachineFactory).
  LogMachine& machine(unsigned i) { return dynamic_cast<LogMachine&>(*machines_[i]); }
  StateMachine& state_machine(unsigned i) { return *machines_[i]; }
  raft_fixture* fixture() { return &fixture_; }
  static ServerId id_of(unsigned i) { return i + 1; }  // the fixture numbers servers from 1
  static std::string address_of(unsigned i) { return std::to_string(i + 1); }

  // A new member with an empty log, started but in no configuration yet.
  unsigned grow();


  // Steps until `done` holds; false if it did not within `max_steps`.
  bool step_until(const std::function<bool()>& done, unsigned max_steps = kMaxSteps);
  // The stable leader as the fixture sees it (acknowledged by a majority).
  std::optional<unsigned> leader();
  std::optional<unsigned> step_until_leader(unsigned max_steps = kMaxSteps);
  // Every member in `members` applied up to `index`.
  bool step_until_applied(const std::vector<unsigned>& members, LogIndex index, unsigned max_steps = kMaxSteps);
  std::vector<unsigned> all() const;

  // Messages between the two groups are dropped, both ways.
  void partition(const std::vector<unsigned>& side_a, const std::vector<unsigned>& side_b);
  void heal(const std::vector<unsigned>& side_a, const std::vector<unsigned>& side_b);

  // Proposes on member `i` and steps until the outcome; nullopt if refused at
  // once or no outcome within `max_steps` (see last_refusal()).
  std::optional<common::Result<LogIndex>> propose_and_wait(unsigned i, std::string_view command,
                                                           unsigned max_steps = kMaxSteps);
  const common::Status& last_refusal() const { return last_refusal_; }

 private:
  // Adds member `i` (its machine, its raft) to the fixture, not started.
  void add_member(unsigned i);

  raft_fixture fixture_{};
  ConsensusOptions options_;
  MachineFactory make_;
  std::vector<std::unique_ptr<StateMachine>> machines_;
  std::vector<std::unique_ptr<RaftConsensus>> nodes_;
  common::Status last_refusal_;
};

}  // namespace magnetar::cluster::testing
