// RaftStore on libraft's deterministic fixture: what replication adds to the
// Store contract (store_conformance_test.cc covers the contract itself).
#include "cluster/raft_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "unit/cluster/store_harness.h"

namespace magnetar::cluster::testing {
namespace {

using common::ErrorCode;
using common::Result;
using common::Status;
using metadata::Event;
using metadata::EventType;
using metadata::kAnyVersion;
using metadata::kMustNotExist;
using metadata::Record;
using metadata::Stat;

std::vector<unsigned> others(RaftStoreCluster& c, unsigned excluded) {
  std::vector<unsigned> out;
  for (unsigned i : c.fixture().all()) {
    if (i != excluded) out.push_back(i);
  }
  return out;
}

// Every member in `members` holds the same key space, sessions included.
void expect_same_state(RaftStoreCluster& c, const std::vector<unsigned>& members, unsigned reference) {
  auto expected = dump(c.machine(reference).state());
  auto expected_snapshot = c.machine(reference).state().snapshot();
  ASSERT_TRUE(expected_snapshot.is_ok());
  for (unsigned i : members) {
    EXPECT_EQ(dump(c.machine(i).state()), expected) << "member " << i;
    auto snapshot = c.machine(i).state().snapshot();
    ASSERT_TRUE(snapshot.is_ok());
    EXPECT_TRUE(*snapshot == *expected_snapshot) << "member " << i << " differs in sessions or store info";
  }
}

// The keys and versions a sequence of events leaves behind.
std::map<std::string, int64_t> replay(const std::vector<Event>& events) {
  std::map<std::string, int64_t> keys;
  for (const Event& e : events) {
    if (e.type == EventType::kDeleted) {
      keys.erase(e.key);
    } else {
      keys[e.key] = e.version;
    }
  }
  return keys;
}

std::map<std::string, int64_t> versions_under(const std::map<std::string, KeyDump>& keys, const std::string& prefix) {
  std::map<std::string, int64_t> out;
  for (const auto& [key, node] : keys) {
    if (key.starts_with(prefix)) out[key] = node.version;
  }
  return out;
}

TEST(RaftStoreTest, EveryMemberHoldsTheSameKeySpaceAndSeesTheSameEvents) {
  RaftStoreCluster c(3);
  std::vector<std::unique_ptr<Events>> events;
  for (unsigned i : c.fixture().all()) {
    events.push_back(std::make_unique<Events>());
    ASSERT_TRUE(c.store(i).watch("/", events.back()->callback()).is_ok());
  }

  auto session = open_session(c, c.store());
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  for (int k = 0; k < 10; k++) ASSERT_TRUE(put(c, c.store(), "/keys/k" + std::to_string(k), "v").is_ok());
  ASSERT_TRUE(put(c, c.store(), "/keys/k3", "again", {1}).is_ok());
  ASSERT_FALSE(put(c, c.store(), "/keys/k4", "stale", {7}).is_ok());
  ASSERT_TRUE(del(c, c.store(), "/keys/k5").is_ok());
  ASSERT_TRUE(put(c, c.store(), "/owned/a", "e", {kMustNotExist, *session}).is_ok());
  ASSERT_TRUE(put(c, c.store(), "/owned/b", "e", {kMustNotExist, *session}).is_ok());
  auto other = open_session(c, c.store());
  ASSERT_TRUE(other.is_ok());
  ASSERT_TRUE(put(c, c.store(), "/owned/c", "e", {kMustNotExist, *other}).is_ok());
  ASSERT_TRUE(close_session(c, c.store(), *session).is_ok());

  ASSERT_TRUE(c.await_caught_up(c.fixture().all()));
  expect_same_state(c, c.fixture().all(), c.leader());
  auto keys = dump(c.machine(c.leader()).state());
  EXPECT_EQ(keys.count("/owned/a"), 0u);
  EXPECT_EQ(keys.count("/keys/k5"), 0u);
  EXPECT_EQ(keys.at("/keys/k3").version, 2);
  EXPECT_EQ(keys.at("/owned/c").session, *other);

  // Watches fire on every member, the same events in the same order.
  auto expected = events[c.leader()]->seen();
  EXPECT_EQ(expected.size(), 17u);  // 10 creates, 1 modify, 1 delete, 3 ephemeral creates, 2 session deletes
  for (unsigned i : c.fixture().all()) {
    auto seen = events[i]->seen();
    ASSERT_EQ(seen.size(), expected.size()) << "member " << i;
    for (size_t k = 0; k < seen.size(); k++) {
      EXPECT_EQ(seen[k].key, expected[k].key) << "member " << i << " event " << k;
      EXPECT_EQ(seen[k].type, expected[k].type) << "member " << i << " event " << k;
      EXPECT_EQ(seen[k].version, expected[k].version) << "member " << i << " event " << k;
    }
  }
}

TEST(RaftStoreTest, FollowerRefusesCallsAndNamesTheLeader) {
  RaftStoreCluster c(3);
  unsigned leader = c.leader();
  unsigned follower = (leader + 1) % 3;
  ASSERT_TRUE(c.run_until([&] { return c.fixture().node(follower).leader().has_value(); }));
  ASSERT_TRUE(put(c, c.store(), "/k", "v").is_ok());

  auto refused = put(c, c.store(follower), "/k", "from-follower");
  EXPECT_EQ(refused.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("leader is server " + std::to_string(FixtureCluster::id_of(leader))),
            std::string::npos)
      << refused.status().to_string();
  EXPECT_EQ(del(c, c.store(follower), "/k").code(), ErrorCode::kUnavailable);
  EXPECT_EQ(open_session(c, c.store(follower)).status().code(), ErrorCode::kUnavailable);
  // Reads are refused rather than served stale.
  EXPECT_EQ(get(c, c.store(follower), "/k").status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(list(c, c.store(follower), "/").status().code(), ErrorCode::kUnavailable);

  auto r = get(c, c.store(), "/k");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->value, "v");
  EXPECT_EQ(r->stat.version, 1);
}

TEST(RaftStoreTest, KilledLeaderIsReplacedAndAcknowledgedWritesSurvive) {
  RaftStoreCluster c(3);
  unsigned first = c.leader();
  std::map<std::string, std::string> acked;
  for (int k = 0; k < 10; k++) {
    std::string key = "/before/k" + std::to_string(k);
    ASSERT_TRUE(put(c, c.store(), key, "v" + std::to_string(k)).is_ok());
    acked[key] = "v" + std::to_string(k);
  }

  raft_fixture_kill(c.fixture().fixture(), first);
  ASSERT_TRUE(c.await_new_leader(first));
  unsigned second = c.leader();
  for (int k = 0; k < 5; k++) {
    std::string key = "/after/k" + std::to_string(k);
    auto written = put(c, c.store(), key, "w");
    ASSERT_TRUE(written.is_ok()) << written.status().to_string();
    acked[key] = "w";
  }
  for (const auto& [key, value] : acked) {
    auto r = get(c, c.store(second), key);
    ASSERT_TRUE(r.is_ok()) << key << ": " << r.status().to_string();
    EXPECT_EQ(r->value, value);
  }
  std::vector<unsigned> survivors = others(c, first);
  ASSERT_TRUE(c.await_caught_up(survivors));
  expect_same_state(c, survivors, second);
}

TEST(RaftStoreTest, LaggingMemberCatchesUpThroughASnapshot) {
  ConsensusOptions options;
  options.snapshot_threshold = 8;
  options.snapshot_trailing = 2;
  RaftStoreCluster c(3, options);
  unsigned leader = c.leader();
  unsigned lagging = (leader + 1) % 3;
  Events events;
  ASSERT_TRUE(c.store(lagging).watch("/s/", events.callback()).is_ok());

  auto session = open_session(c, c.store());
  ASSERT_TRUE(session.is_ok());
  ASSERT_TRUE(put(c, c.store(), "/s/gone", "x").is_ok());
  ASSERT_TRUE(put(c, c.store(), "/s/changed", "x").is_ok());
  ASSERT_TRUE(c.await_caught_up(c.fixture().all()));

  raft_fixture_kill(c.fixture().fixture(), lagging);
  for (int k = 0; k < 30; k++) ASSERT_TRUE(put(c, c.store(), "/s/k" + std::to_string(k % 12), "v").is_ok());
  ASSERT_TRUE(del(c, c.store(), "/s/gone").is_ok());
  ASSERT_TRUE(put(c, c.store(), "/s/changed", "y").is_ok());
  // The session opened before the snapshot still owns keys after it.
  ASSERT_TRUE(put(c, c.store(), "/s/owned", "e", {kMustNotExist, *session}).is_ok());
  EXPECT_GE(c.machine(leader).snapshots_taken(), 1u);

  raft_fixture_revive(c.fixture().fixture(), lagging);
  ASSERT_TRUE(c.await_caught_up(c.fixture().all()));
  EXPECT_GE(c.machine(lagging).snapshots_restored(), 1u);
  expect_same_state(c, c.fixture().all(), leader);
  // Its watches saw enough to know the key space it now holds.
  EXPECT_EQ(replay(events.seen()), versions_under(dump(c.machine(lagging).state()), "/s/"));

  // It applies what follows like everyone else, ephemeral keys included.
  ASSERT_TRUE(put(c, c.store(), "/s/later", "z").is_ok());
  ASSERT_TRUE(close_session(c, c.store(), *session).is_ok());
  ASSERT_TRUE(c.await_caught_up(c.fixture().all()));
  expect_same_state(c, c.fixture().all(), leader);
  EXPECT_EQ(dump(c.machine(lagging).state()).count("/s/owned"), 0u);
  EXPECT_EQ(replay(events.seen()), versions_under(dump(c.machine(lagging).state()), "/s/"));
}

TEST(RaftStoreTest, ConcurrentCompareAndSetHasExactlyOneWinner) {
  RaftStoreCluster c(3);
  ASSERT_TRUE(put(c, c.store(), "/cas", "0").is_ok());
  for (int64_t round = 1; round <= 5; round++) {
    std::vector<Result<Stat>> answers;
    // Both proposals are in flight before either is committed.
    for (const char* who : {"a", "b"}) {
      c.store().put("/cas", who, {round}, [&](Result<Stat> r) { answers.push_back(std::move(r)); });
    }
    ASSERT_TRUE(c.run_until([&] { return answers.size() == 2; }));
    int winners = 0;
    for (const auto& r : answers) {
      if (r.is_ok()) {
        winners++;
        EXPECT_EQ(r->version, round + 1);
      } else {
        EXPECT_EQ(r.status().code(), ErrorCode::kFailedPrecondition) << r.status().to_string();
      }
    }
    EXPECT_EQ(winners, 1) << "round " << round;
  }
  EXPECT_EQ(get(c, c.store(), "/cas")->stat.version, 6);
}

// A history of read-then-compare-and-set increments from several clients, in
// fixture steps. Checked for linearizability of the register's versions:
// successful writes make one chain in real-time order, and every answer
// (read or failed write) is explained by some version current during the call.
struct Op {
  enum Kind { kRead, kCas } kind;
  uint64_t invoked = 0;
  uint64_t answered = 0;
  int64_t version = 0;  // kRead: seen; kCas: expected
  bool ok = false;      // kCas: won
};

// The interval in which `version` was current, as [earliest start, latest
// end]: it starts no earlier than the write that made it was invoked, and ends
// no later than the write that replaced it answered.
struct Interval {
  uint64_t from = 0;
  uint64_t to = UINT64_MAX;
};

TEST(RaftStoreTest, CompareAndSetHistoryIsLinearizable) {
  RaftStoreCluster c(3);
  ASSERT_TRUE(put(c, c.store(), "/counter", "0").is_ok());  // version 1
  std::vector<Op> history;
  constexpr int kClients = 3;
  constexpr int kAttempts = 8;
  int running = kClients;

  // Each client: read, then compare-and-set on what it read, kAttempts times.
  std::function<void(int, int)> next = [&](int client, int attempt) {
    if (attempt == kAttempts) {
      running--;
      return;
    }
    size_t read = history.size();
    history.push_back(Op{Op::kRead, c.steps()});
    c.store().get("/counter", [&, client, attempt, read](Result<Record> r) {
      history[read].answered = c.steps();
      ASSERT_TRUE(r.is_ok()) << r.status().to_string();
      history[read].version = r->stat.version;
      size_t cas = history.size();
      history.push_back(Op{Op::kCas, c.steps(), 0, r->stat.version});
      c.store().put("/counter", std::to_string(client), {r->stat.version}, [&, client, attempt, cas](Result<Stat> w) {
        history[cas].answered = c.steps();
        history[cas].ok = w.is_ok();
        if (!w.is_ok()) {
          EXPECT_EQ(w.status().code(), ErrorCode::kFailedPrecondition);
        }
        next(client, attempt + 1);
      });
    });
  };
  for (int client = 0; client < kClients; client++) next(client, 0);
  ASSERT_TRUE(c.run_until([&] { return running == 0; }));

  // The winners, by the version each made (expected + 1): one chain from 2.
  std::map<int64_t, const Op*> made;
  for (const Op& op : history) {
    if (op.kind == Op::kCas && op.ok) {
      EXPECT_TRUE(made.emplace(op.version + 1, &op).second) << "two writes made version " << op.version + 1;
    }
  }
  ASSERT_FALSE(made.empty());
  EXPECT_EQ(made.begin()->first, 2);
  EXPECT_EQ(made.rbegin()->first, static_cast<int64_t>(made.size()) + 1);
  auto final_version = get(c, c.store(), "/counter");
  ASSERT_TRUE(final_version.is_ok());
  EXPECT_EQ(final_version->stat.version, static_cast<int64_t>(made.size()) + 1);
  // Real time: a write that answered before another was invoked made the lower version.
  for (const auto& [v1, a] : made) {
    for (const auto& [v2, b] : made) {
      if (a->answered < b->invoked) {
        EXPECT_LT(v1, v2);
      }
    }
  }
  // When was each version current, at the widest?
  std::map<int64_t, Interval> current;
  current[1] = Interval{0, made.count(2) ? made.at(2)->answered : UINT64_MAX};
  for (const auto& [v, op] : made) {
    current[v] = Interval{op->invoked, made.count(v + 1) ? made.at(v + 1)->answered : UINT64_MAX};
  }
  for (const Op& op : history) {
    if (op.kind == Op::kRead) {
      // The version read was current at some moment of the call.
      ASSERT_TRUE(current.count(op.version)) << "read a version no write made: " << op.version;
      const Interval& when = current.at(op.version);
      EXPECT_TRUE(when.from <= op.answered && op.invoked <= when.to) << "stale or future read of " << op.version;
    } else if (!op.ok) {
      // A failed write saw some other version: its expected one was not
      // current throughout the call.
      const Interval& when = current.at(op.version);
      bool surely_current = made.count(op.version) ? made.at(op.version)->answered <= op.invoked : true;
      bool replaced_after = !made.count(op.version + 1) || made.at(op.version + 1)->invoked > op.answered;
      EXPECT_FALSE(surely_current && replaced_after && when.from <= op.invoked)
          << "a write expecting " << op.version << " failed while that version was current";
    }
  }
  // Contention made some writes fail; every round had a winner.
  auto failed =
      std::count_if(history.begin(), history.end(), [](const Op& op) { return op.kind == Op::kCas && !op.ok; });
  EXPECT_GT(failed, 0);
  EXPECT_GE(made.size(), static_cast<size_t>(kAttempts));
}

TEST(RaftStoreTest, DeposedLeaderAnswersFencedOrNotLeader) {
  RaftStoreCluster c(3);
  unsigned old = c.leader();
  ASSERT_TRUE(put(c, c.store(), "/k", "v").is_ok());
  // Cut the leader off with a write in flight: it cannot commit, and once a new
  // leader is elected and the old one steps down the write's outcome is
  // unknown to its caller.
  c.fixture().partition({old}, others(c, old));
  std::optional<Result<Stat>> answer;
  c.store(old).put("/k", "lost?", {}, [&](Result<Stat> r) { answer = std::move(r); });
  ASSERT_TRUE(c.run_until([&] { return answer.has_value(); }));
  EXPECT_EQ(answer->status().code(), ErrorCode::kFenced) << answer->status().to_string();
  EXPECT_EQ(put(c, c.store(old), "/k", "again").status().code(), ErrorCode::kUnavailable);
  c.fixture().heal({old}, others(c, old));
  ASSERT_TRUE(c.run_until([&] { return c.fixture().leader().has_value(); }));
  // Whoever leads now serves writes again.
  auto written = put(c, c.store(), "/k", "after");
  ASSERT_TRUE(written.is_ok()) << written.status().to_string();
}

}  // namespace
}  // namespace magnetar::cluster::testing
