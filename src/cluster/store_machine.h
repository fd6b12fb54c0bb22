// StoreMachine: the metadata store's state (metadata::StoreState) as the
// StateMachine of a Consensus. Every member applies the same WriteOps in log
// order to its own LevelDB database and notifies its own watchers as it does,
// so watches fire on every member, in log order.
//
// Outcomes by index. An op's answer (a failed compare-and-set, a new session
// id) is decided when it is applied, which on the proposer happens just before
// its propose callback. While a proposal is in flight on this member the
// machine keeps each applied op's outcome by log index, and the proposer takes
// the one for its index. Outcomes nobody takes (an entry proposed by a leader
// that was deposed, then committed by the next one) are dropped once a later
// index is taken or no proposal is in flight: memory stays bounded by what is
// in flight.
//
// Durability comes from the log: the database is written without fdatasync,
// and a failed write stops the process (a member that skipped a command would
// diverge from the others; see consensus.h).
//
// Threads: the consensus thread only, like every StateMachine.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "cluster/consensus.h"
#include "metadata/store_state.h"
#include "metadata/watchers.h"

namespace magnetar::cluster {

class StoreMachine final : public StateMachine {
 public:
  using Outcome = metadata::StoreState::Applied;

  // `path`: the member's own database directory.
  explicit StoreMachine(std::string path, leveldb::Env* env = nullptr);

  // Opens the database. The log is replayed from an empty state (a restart
  // from disk that resumes from the database is not built yet), so an
  // existing database that holds anything is refused with FailedPrecondition.
  // REQUIRES: before the consensus starts.
  common::Status open();

  void apply(LogIndex index, std::string_view command) override;
  std::string snapshot() override;
  common::Status restore(std::string_view bytes) override;

  // The proposer's side of outcomes by index: begin_proposal() before each
  // propose, then exactly one end_proposal() from its callback, with the
  // entry's index or, when the proposal failed, nullopt. Returns the outcome
  // applied at that index (nullopt when there is none, or it failed).
  void begin_proposal() { in_flight_++; }
  std::optional<Outcome> end_proposal(std::optional<LogIndex> index);

  metadata::StoreState& state() { return state_; }
  metadata::Watchers& watchers() { return watchers_; }
  // Snapshots taken and restored by this member so far: how often it helped
  // compact the log, and how often it caught up from another member's state.
  uint64_t snapshots_taken() const { return snapshots_taken_; }
  uint64_t snapshots_restored() const { return snapshots_restored_; }

 private:
  metadata::StoreState state_;
  metadata::Watchers watchers_;
  unsigned in_flight_ = 0;
  uint64_t snapshots_taken_ = 0;
  uint64_t snapshots_restored_ = 0;
  std::map<LogIndex, Outcome> outcomes_;  // only while in_flight_ > 0
};

}  // namespace magnetar::cluster
