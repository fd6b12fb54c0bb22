// RaftConsensus on libraft's deterministic fixture: elections, commits,
// failover, partitions, catch-up through snapshots, membership, transfers.
#include "cluster/raft_consensus.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "unit/cluster/fixture_cluster.h"

namespace magnetar::cluster {
namespace {

using common::ErrorCode;
using common::Result;
using common::Status;
using testing::FixtureCluster;
using testing::LogMachine;

std::vector<unsigned> others(const FixtureCluster& c, std::vector<unsigned> excluded) {
  std::vector<unsigned> out;
  for (unsigned i : c.all()) {
    if (std::find(excluded.begin(), excluded.end(), i) == excluded.end()) out.push_back(i);
  }
  return out;
}

// Every member in `members` applied exactly `expected`, in that order.
void expect_same_log(FixtureCluster& c, const std::vector<unsigned>& members,
                     const std::vector<std::string>& expected) {
  for (unsigned i : members) {
    EXPECT_EQ(c.machine(i).commands, expected) << "member " << i;
    EXPECT_FALSE(c.machine(i).out_of_order) << "member " << i;
  }
}

// Proposes `n` commands "<prefix>-<k>" on the leader and waits for each one.
std::vector<std::string> commit(FixtureCluster& c, unsigned leader, const std::string& prefix, int n) {
  std::vector<std::string> committed;
  for (int k = 0; k < n; k++) {
    std::string command = prefix + "-" + std::to_string(k);
    auto outcome = c.propose_and_wait(leader, command);
    EXPECT_TRUE(outcome.has_value()) << command << ": " << c.last_refusal().to_string();
    if (!outcome) break;
    EXPECT_TRUE(outcome->is_ok()) << command << ": " << outcome->status().to_string();
    if (!outcome->is_ok()) break;
    committed.push_back(command);
  }
  return committed;
}

class RaftConsensusTest : public ::testing::TestWithParam<unsigned> {};

INSTANTIATE_TEST_SUITE_P(Members, RaftConsensusTest, ::testing::Values(3u, 5u),
                         [](const auto& info) { return std::to_string(info.param) + "_members"; });

TEST_P(RaftConsensusTest, ElectsOneLeaderEveryMemberKnows) {
  FixtureCluster c(GetParam());
  auto leader = c.step_until_leader();
  ASSERT_TRUE(leader.has_value());
  // Followers learn the leader from its first heartbeat.
  ASSERT_TRUE(c.step_until([&] {
    for (unsigned i : c.all()) {
      if (!c.node(i).leader() || c.node(i).leader()->id != FixtureCluster::id_of(*leader)) return false;
    }
    return true;
  }));
  int leaders = 0;
  for (unsigned i : c.all()) leaders += c.node(i).is_leader() ? 1 : 0;
  EXPECT_EQ(leaders, 1);
  EXPECT_EQ(c.node(0).leader()->address, FixtureCluster::address_of(*leader));
  EXPECT_EQ(c.node(0).members().size(), GetParam());
}

TEST_P(RaftConsensusTest, EveryMemberAppliesTheSameCommandsInOrder) {
  FixtureCluster c(GetParam());
  auto leader = c.step_until_leader();
  ASSERT_TRUE(leader.has_value());

  // Many proposals in flight at once; their indexes come back in order.
  std::vector<std::string> expected;
  std::vector<LogIndex> indexes;
  for (int k = 0; k < 20; k++) {
    expected.push_back("cmd-" + std::to_string(k));
    ASSERT_TRUE(c.node(*leader).propose(expected.back(), [&](Result<LogIndex> r) {
      ASSERT_TRUE(r.is_ok()) << r.status().to_string();
      // The callback runs after the command was applied here.
      EXPECT_GE(c.node(*leader).applied_index(), *r);
      indexes.push_back(*r);
    }).is_ok());
  }
  ASSERT_TRUE(c.step_until([&] { return indexes.size() == expected.size(); }));
  EXPECT_TRUE(std::is_sorted(indexes.begin(), indexes.end()));
  EXPECT_EQ(std::adjacent_find(indexes.begin(), indexes.end()), indexes.end());
  ASSERT_TRUE(c.step_until_applied(c.all(), indexes.back()));
  expect_same_log(c, c.all(), expected);
}

TEST_P(RaftConsensusTest, FollowerRefusesProposalsAndNamesTheLeader) {
  FixtureCluster c(GetParam());
  auto leader = c.step_until_leader();
  ASSERT_TRUE(leader.has_value());
  unsigned follower = (*leader + 1) % c.size();
  ASSERT_TRUE(c.step_until([&] { return c.node(follower).leader().has_value(); }));

  bool called = false;
  Status st = c.node(follower).propose("x", [&](Result<LogIndex>) { called = true; });
  EXPECT_EQ(st.code(), ErrorCode::kFailedPrecondition) << st.to_string();
  EXPECT_EQ(c.node(follower).leader()->id, FixtureCluster::id_of(*leader));
  Status barrier = c.node(follower).barrier([&](Result<LogIndex>) { called = true; });
  EXPECT_EQ(barrier.code(), ErrorCode::kFailedPrecondition);
  c.step_until([] { return false; }, 200);
  EXPECT_FALSE(called);  // a refused request never calls back
  EXPECT_EQ(c.node(*leader).propose("", [](Result<LogIndex>) {}).code(), ErrorCode::kInvalidArgument);
}

TEST_P(RaftConsensusTest, KilledLeaderIsReplacedAndAcknowledgedCommandsSurvive) {
  FixtureCluster c(GetParam());
  auto first = c.step_until_leader();
  ASSERT_TRUE(first.has_value());
  std::vector<std::string> acked = commit(c, *first, "before", 10);
  ASSERT_EQ(acked.size(), 10u);

  // A killed server gets no ticks, so it stays a leader of an old term in
  // its own eyes: wait for a leader among the survivors.
  raft_fixture_kill(c.fixture(), *first);
  ASSERT_TRUE(c.step_until([&] { return c.leader() && *c.leader() != *first; }));
  auto second = c.leader();

  std::vector<std::string> after = commit(c, *second, "after", 5);
  ASSERT_EQ(after.size(), 5u);
  acked.insert(acked.end(), after.begin(), after.end());
  std::vector<unsigned> survivors = others(c, {*first});
  ASSERT_TRUE(c.step_until_applied(survivors, c.node(*second).applied_index()));
  expect_same_log(c, survivors, acked);
}

TEST_P(RaftConsensusTest, DeposedLeaderFailsPendingProposalsWithLeadershipLost) {
  FixtureCluster c(GetParam());
  auto first = c.step_until_leader();
  ASSERT_TRUE(first.has_value());
  std::vector<std::string> acked = commit(c, *first, "before", 3);

  // Cut the leader off before its next proposal can commit.
  c.partition({*first}, others(c, {*first}));
  std::optional<Result<LogIndex>> outcome;
  ASSERT_TRUE(c.node(*first).propose("orphan", [&](Result<LogIndex> r) { outcome = std::move(r); }).is_ok());
  ASSERT_TRUE(c.step_until([&] { return outcome.has_value(); }));
  EXPECT_EQ(outcome->status().code(), ErrorCode::kFenced) << outcome->status().to_string();
  EXPECT_FALSE(c.node(*first).is_leader());

  c.heal({*first}, others(c, {*first}));
  auto second = c.step_until_leader();
  ASSERT_TRUE(second.has_value());
  std::vector<std::string> after = commit(c, *second, "after", 2);
  acked.insert(acked.end(), after.begin(), after.end());
  ASSERT_TRUE(c.step_until_applied(c.all(), c.node(*second).applied_index()));
  // The orphan never reached a follower, so the new leader's log replaced it.
  expect_same_log(c, c.all(), acked);
}

TEST_P(RaftConsensusTest, MinorityCannotCommitMajorityCan) {
  FixtureCluster c(GetParam());
  auto first = c.step_until_leader();
  ASSERT_TRUE(first.has_value());
  std::vector<std::string> acked = commit(c, *first, "before", 3);

  // The old leader keeps (size - 1) / 2 - 1 followers: a minority.
  std::vector<unsigned> minority{*first};
  for (unsigned i : others(c, {*first})) {
    if (minority.size() < (c.size() - 1) / 2) minority.push_back(i);
  }
  std::vector<unsigned> majority = others(c, minority);
  c.partition(minority, majority);

  std::optional<Result<LogIndex>> stranded;
  ASSERT_TRUE(c.node(*first).propose("stranded", [&](Result<LogIndex> r) { stranded = std::move(r); }).is_ok());

  // The majority elects a leader of its own and commits.
  std::optional<unsigned> second;
  ASSERT_TRUE(c.step_until([&] {
    for (unsigned i : majority) {
      if (c.node(i).is_leader()) second = i;
    }
    return second.has_value();
  }));
  std::vector<std::string> after = commit(c, *second, "majority", 5);
  ASSERT_EQ(after.size(), 5u);
  acked.insert(acked.end(), after.begin(), after.end());

  // Nothing the minority holds was ever applied as committed.
  for (unsigned i : minority) {
    for (const std::string& command : c.machine(i).commands) EXPECT_NE(command, "stranded");
  }
  // The old leader steps down once it misses the majority for an election
  // timeout, and fails what it could not commit.
  ASSERT_TRUE(c.step_until([&] { return stranded.has_value(); }));
  EXPECT_EQ(stranded->status().code(), ErrorCode::kFenced);

  c.heal(minority, majority);
  ASSERT_TRUE(c.step_until_applied(c.all(), c.node(*second).applied_index()));
  expect_same_log(c, c.all(), acked);
}

TEST_P(RaftConsensusTest, LaggingMemberCatchesUpThroughASnapshot) {
  ConsensusOptions options;
  options.snapshot_threshold = 8;
  options.snapshot_trailing = 2;
  FixtureCluster c(GetParam(), options);
  auto leader = c.step_until_leader();
  ASSERT_TRUE(leader.has_value());
  std::vector<std::string> acked = commit(c, *leader, "early", 3);

  unsigned lagging = (*leader + 1) % c.size();
  raft_fixture_kill(c.fixture(), lagging);
  std::vector<std::string> more = commit(c, *leader, "while-down", 30);
  ASSERT_EQ(more.size(), 30u);
  acked.insert(acked.end(), more.begin(), more.end());
  // The leader has compacted its log past what the lagging member holds.
  EXPECT_GE(c.machine(*leader).snapshots, 1);

  raft_fixture_revive(c.fixture(), lagging);
  ASSERT_TRUE(c.step_until_applied(c.all(), c.node(*leader).applied_index()));
  EXPECT_GE(c.machine(lagging).restores, 1);
  expect_same_log(c, c.all(), acked);

  // And it keeps up with what comes after.
  std::vector<std::string> later = commit(c, *leader, "later", 3);
  acked.insert(acked.end(), later.begin(), later.end());
  ASSERT_TRUE(c.step_until_applied(c.all(), c.node(*leader).applied_index()));
  expect_same_log(c, c.all(), acked);
}

TEST_P(RaftConsensusTest, LaggingMemberCatchesUpFromTheLog) {
  FixtureCluster c(GetParam());
  auto leader = c.step_until_leader();
  ASSERT_TRUE(leader.has_value());
  unsigned lagging = (*leader + 1) % c.size();
  raft_fixture_kill(c.fixture(), lagging);
  std::vector<std::string> acked = commit(c, *leader, "while-down", 10);
  raft_fixture_revive(c.fixture(), lagging);
  ASSERT_TRUE(c.step_until_applied(c.all(), c.node(*leader).applied_index()));
  EXPECT_EQ(c.machine(lagging).restores, 0);
  expect_same_log(c, c.all(), acked);
}

TEST_P(RaftConsensusTest, BarrierCoversEveryEarlierCommand) {
  FixtureCluster c(GetParam());
  auto leader = c.step_until_leader();
  ASSERT_TRUE(leader.has_value());
  std::optional<Result<LogIndex>> last;
  for (int k = 0; k < 5; k++) {
    ASSERT_TRUE(c.node(*leader).propose("w" + std::to_string(k), [&](Result<LogIndex> r) { last = r; }).is_ok());
  }
  std::optional<Result<LogIndex>> read_point;
  size_t applied_at_barrier = 0;
  ASSERT_TRUE(c.node(*leader).barrier([&](Result<LogIndex> r) {
    read_point = r;
    applied_at_barrier = c.machine(*leader).commands.size();
  }).is_ok());
  ASSERT_TRUE(c.step_until([&] { return read_point.has_value(); }));
  ASSERT_TRUE(read_point->is_ok()) << read_point->status().to_string();
  ASSERT_TRUE(last.has_value() && last->is_ok());
  EXPECT_GT(**read_point, **last);
  EXPECT_EQ(applied_at_barrier, 5u);
}

TEST_P(RaftConsensusTest, StandbyJoinsIsPromotedAndAVoterIsRemoved) {
  FixtureCluster c(GetParam());
  auto leader = c.step_until_leader();
  ASSERT_TRUE(leader.has_value());
  std::vector<std::string> acked = commit(c, *leader, "before-join", 5);

  unsigned joiner = c.grow();
  ServerId joiner_id = FixtureCluster::id_of(joiner);
  std::optional<Status> added;
  ASSERT_TRUE(c.node(*leader).add_server(joiner_id, FixtureCluster::address_of(joiner), Role::kStandby,
                                         [&](Status st) { added = st; }).is_ok());
  ASSERT_TRUE(c.step_until([&] { return added.has_value(); }));
  ASSERT_TRUE(added->is_ok()) << added->to_string();
  auto role_of = [&](unsigned member, ServerId id) -> std::optional<Role> {
    for (const Server& s : c.node(member).members()) {
      if (s.id == id) return s.role;
    }
    return std::nullopt;
  };
  EXPECT_EQ(role_of(*leader, joiner_id), Role::kStandby);
  // A standby receives the log and applies it, without voting.
  ASSERT_TRUE(c.step_until_applied({joiner}, c.node(*leader).applied_index()));
  expect_same_log(c, {joiner}, acked);

  // Only one change at a time.
  std::optional<Status> promoted;
  ASSERT_TRUE(c.node(*leader).assign_role(joiner_id, Role::kVoter, [&](Status st) { promoted = st; }).is_ok());
  Status second_change = c.node(*leader).assign_role(joiner_id, Role::kSpare, [](Status) {});
  EXPECT_EQ(second_change.code(), ErrorCode::kUnavailable) << second_change.to_string();
  ASSERT_TRUE(c.step_until([&] { return promoted.has_value(); }));
  ASSERT_TRUE(promoted->is_ok()) << promoted->to_string();
  EXPECT_EQ(role_of(*leader, joiner_id), Role::kVoter);
  EXPECT_EQ(c.node(*leader).assign_role(joiner_id, Role::kVoter, [](Status) {}).code(),
            ErrorCode::kInvalidArgument);

  // Remove a follower that was a founding voter; the cluster keeps committing.
  unsigned removed = (*leader + 1) % GetParam();
  ServerId removed_id = FixtureCluster::id_of(removed);
  std::optional<Status> gone;
  ASSERT_TRUE(c.node(*leader).remove_server(removed_id, [&](Status st) { gone = st; }).is_ok());
  ASSERT_TRUE(c.step_until([&] { return gone.has_value(); }));
  ASSERT_TRUE(gone->is_ok()) << gone->to_string();
  EXPECT_FALSE(role_of(*leader, removed_id).has_value());
  EXPECT_EQ(c.node(*leader).members().size(), GetParam());
  EXPECT_EQ(c.node(*leader).remove_server(removed_id, [](Status) {}).code(), ErrorCode::kInvalidArgument);

  std::vector<std::string> after = commit(c, *leader, "after-change", 3);
  ASSERT_EQ(after.size(), 3u);
  acked.insert(acked.end(), after.begin(), after.end());
  std::vector<unsigned> members = others(c, {removed});
  ASSERT_TRUE(c.step_until_applied(members, c.node(*leader).applied_index()));
  expect_same_log(c, members, acked);
}

TEST_P(RaftConsensusTest, AddServerAsVoterCatchesUpThenVotes) {
  FixtureCluster c(GetParam());
  auto leader = c.step_until_leader();
  ASSERT_TRUE(leader.has_value());
  std::vector<std::string> acked = commit(c, *leader, "before-join", 20);
  unsigned joiner = c.grow();
  std::optional<Status> added;
  ASSERT_TRUE(c.node(*leader).add_server(FixtureCluster::id_of(joiner), FixtureCluster::address_of(joiner),
                                         Role::kVoter, [&](Status st) { added = st; }).is_ok());
  ASSERT_TRUE(c.step_until([&] { return added.has_value(); }));
  ASSERT_TRUE(added->is_ok()) << added->to_string();
  ASSERT_TRUE(c.step_until_applied({joiner}, c.node(*leader).applied_index()));
  expect_same_log(c, {joiner}, acked);
  bool voter = false;
  for (const Server& s : c.node(joiner).members()) {
    voter |= s.id == FixtureCluster::id_of(joiner) && s.role == Role::kVoter;
  }
  EXPECT_TRUE(voter);
}

TEST_P(RaftConsensusTest, RemovingTheLeaderMakesItStepDown) {
  FixtureCluster c(GetParam());
  auto first = c.step_until_leader();
  ASSERT_TRUE(first.has_value());
  std::vector<std::string> acked = commit(c, *first, "before", 3);
  std::optional<Status> gone;
  ASSERT_TRUE(c.node(*first).remove_server(FixtureCluster::id_of(*first), [&](Status st) { gone = st; }).is_ok());
  ASSERT_TRUE(c.step_until([&] { return gone.has_value(); }));
  EXPECT_TRUE(gone->is_ok()) << gone->to_string();
  EXPECT_FALSE(c.node(*first).is_leader());
  std::vector<unsigned> rest = others(c, {*first});
  std::optional<unsigned> second;
  ASSERT_TRUE(c.step_until([&] {
    for (unsigned i : rest) {
      if (c.node(i).is_leader()) second = i;
    }
    return second.has_value();
  }));
  std::vector<std::string> after = commit(c, *second, "after", 3);
  acked.insert(acked.end(), after.begin(), after.end());
  ASSERT_TRUE(c.step_until_applied(rest, c.node(*second).applied_index()));
  expect_same_log(c, rest, acked);
}

TEST_P(RaftConsensusTest, LeadershipMovesToTheChosenVoter) {
  FixtureCluster c(GetParam());
  auto first = c.step_until_leader();
  ASSERT_TRUE(first.has_value());
  std::vector<std::string> acked = commit(c, *first, "before", 3);
  unsigned target = (*first + c.size() - 1) % c.size();

  std::optional<Status> moved;
  ServerId target_id = FixtureCluster::id_of(target);
  ASSERT_TRUE(c.node(*first).transfer_leadership(target_id, [&](Status st) { moved = st; }).is_ok());
  // While handing over, the old leader takes no new commands.
  EXPECT_EQ(c.node(*first).propose("during", [](Result<LogIndex>) {}).code(), ErrorCode::kFailedPrecondition);
  ASSERT_TRUE(c.step_until([&] { return moved.has_value(); }));
  ASSERT_TRUE(moved->is_ok()) << moved->to_string();
  ASSERT_TRUE(c.step_until([&] { return c.node(target).is_leader(); }));
  EXPECT_FALSE(c.node(*first).is_leader());

  // 0 picks a voter by itself.
  std::optional<Status> again;
  ASSERT_TRUE(c.node(target).transfer_leadership(0, [&](Status st) { again = st; }).is_ok());
  ASSERT_TRUE(c.step_until([&] { return again.has_value(); }));
  EXPECT_TRUE(again->is_ok()) << again->to_string();
  auto third = c.step_until_leader();
  ASSERT_TRUE(third.has_value());
  EXPECT_NE(*third, target);

  std::vector<std::string> after = commit(c, *third, "after", 3);
  acked.insert(acked.end(), after.begin(), after.end());
  ASSERT_TRUE(c.step_until_applied(c.all(), c.node(*third).applied_index()));
  expect_same_log(c, c.all(), acked);

  EXPECT_EQ(c.node(*third).transfer_leadership(FixtureCluster::id_of(*third), [](Status) {}).code(),
            ErrorCode::kInvalidArgument);
}

TEST_P(RaftConsensusTest, ClosingFailsPendingRequestsAsShutdown) {
  std::optional<Result<LogIndex>> outcome;
  {
    FixtureCluster c(GetParam());
    auto leader = c.step_until_leader();
    ASSERT_TRUE(leader.has_value());
    ASSERT_TRUE(c.node(*leader).propose("in-flight", [&](Result<LogIndex> r) { outcome = std::move(r); }).is_ok());
  }
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->status().code(), ErrorCode::kUnavailable) << outcome->status().to_string();
}

}  // namespace
}  // namespace magnetar::cluster
