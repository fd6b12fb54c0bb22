#include "unit/cluster/fixture_cluster.h"

#include <gtest/gtest.h>

#include <cstring>

namespace magnetar::cluster::testing {

namespace {

void put_u64(std::string& out, uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);
  out.append(b, 8);
}

bool get_u64(std::string_view& in, uint64_t& v) {
  if (in.size() < 8) return false;
  std::memcpy(&v, in.data(), 8);
  in.remove_prefix(8);
  return true;
}

}  // namespace

void LogMachine::apply(LogIndex index, std::string_view command) {
  if (index <= last_index) out_of_order = true;
  last_index = index;
  commands.emplace_back(command);
}

// Layout: last index (8 bytes), count (8 bytes), then per command its length
// (8 bytes) and its bytes. Host byte order: the fixture is one process.
std::string LogMachine::snapshot() {
  snapshots++;
  std::string out;
  put_u64(out, last_index);
  put_u64(out, commands.size());
  for (const std::string& c : commands) {
    put_u64(out, c.size());
    out += c;
  }
  return out;
}

common::Status LogMachine::restore(std::string_view bytes) {
  uint64_t index = 0;
  uint64_t count = 0;
  if (!get_u64(bytes, index) || !get_u64(bytes, count)) return common::Status::corruption("short snapshot");
  std::vector<std::string> restored;
  for (uint64_t i = 0; i < count; i++) {
    uint64_t len = 0;
    if (!get_u64(bytes, len) || bytes.size() < len) return common::Status::corruption("truncated command");
    restored.emplace_back(bytes.substr(0, len));
    bytes.remove_prefix(len);
  }
  restores++;
  last_index = index;
  commands = std::move(restored);
  return common::Status::ok();
}

FixtureCluster::FixtureCluster(unsigned voters, const ConsensusOptions& options, MachineFactory make)
    : options_(options), make_(std::move(make)) {
  if (!make_) make_ = [](unsigned) { return std::make_unique<LogMachine>(); };
  EXPECT_EQ(raft_fixture_initialize(&fixture_), 0);
  std::vector<Server> members;
  for (unsigned i = 0; i < voters; i++) {
    add_member(i);
    members.push_back(Server{id_of(i), address_of(i), Role::kVoter});
  }
  for (auto& node : nodes_) {
    EXPECT_TRUE(node->bootstrap(members).is_ok());
    EXPECT_TRUE(node->start().is_ok());
  }
}

FixtureCluster::~FixtureCluster() {
  for (auto& node : nodes_) node->mark_closing();
  raft_fixture_close(&fixture_);
}

void FixtureCluster::add_member(unsigned i) {
  machines_.push_back(make_(i));
  nodes_.push_back(RaftConsensus::for_host(*machines_.back()));
  EXPECT_EQ(raft_fixture_grow(&fixture_, nodes_.back()->fsm()), 0);
  nodes_.back()->attach(raft_fixture_get(&fixture_, i), options_);
}

unsigned FixtureCluster::grow() {
  unsigned i = size();
  add_member(i);
  EXPECT_TRUE(nodes_.back()->start().is_ok());
  return i;
}

bool FixtureCluster::step_until(const std::function<bool()>& done, unsigned max_steps) {
  for (unsigned step = 0; step < max_steps; step++) {
    if (done()) return true;
    raft_fixture_step(&fixture_);
  }
  return done();
}

std::optional<unsigned> FixtureCluster::leader() {
  unsigned i = raft_fixture_leader_index(&fixture_);
  if (i >= size()) return std::nullopt;
  return i;
}

std::optional<unsigned> FixtureCluster::step_until_leader(unsigned max_steps) {
  step_until([&] { return leader().has_value(); }, max_steps);
  return leader();
}

bool FixtureCluster::step_until_applied(const std::vector<unsigned>& members, LogIndex index, unsigned max_steps) {
  return step_until(
      [&] {
        for (unsigned i : members) {
          if (node(i).applied_index() < index) return false;
        }
        return true;
      },
      max_steps);
}

std::vector<unsigned> FixtureCluster::all() const {
  std::vector<unsigned> out;
  for (unsigned i = 0; i < size(); i++) out.push_back(i);
  return out;
}

void FixtureCluster::partition(const std::vector<unsigned>& side_a, const std::vector<unsigned>& side_b) {
  for (unsigned a : side_a) {
    for (unsigned b : side_b) {
      raft_fixture_saturate(&fixture_, a, b);
      raft_fixture_saturate(&fixture_, b, a);
    }
  }
}

void FixtureCluster::heal(const std::vector<unsigned>& side_a, const std::vector<unsigned>& side_b) {
  for (unsigned a : side_a) {
    for (unsigned b : side_b) {
      raft_fixture_desaturate(&fixture_, a, b);
      raft_fixture_desaturate(&fixture_, b, a);
    }
  }
}

std::optional<common::Result<LogIndex>> FixtureCluster::propose_and_wait(unsigned i, std::string_view command,
                                                                         unsigned max_steps) {
  auto outcome = std::make_shared<std::optional<common::Result<LogIndex>>>();
  last_refusal_ = node(i).propose(command, [outcome](common::Result<LogIndex> r) { *outcome = std::move(r); });
  if (!last_refusal_.is_ok()) return std::nullopt;
  step_until([&] { return outcome->has_value(); }, max_steps);
  return *outcome;
}

}  // namespace magnetar::cluster::testing
