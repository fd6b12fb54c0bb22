// The replicated storage and its storage nodes in one process: real local
// storages in temporary directories, real storage servers, a real metadata
// store; only the network between them is a function call, and a node can
// be taken "down" (its calls fail as a broken connection's do).
#include "replication/replicated_storage.h"

#include <gtest/gtest.h>

#include <future>
#include <optional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "../storage/storage_test_util.h"
#include "cluster/rpc_records.h"
#include "metadata/blocking.h"
#include "metadata/leveldb_store.h"
#include "replication/replication_generated.h"
#include "replication/requests.h"
#include "replication/storage_server.h"
#include "runtime/reactor.h"

namespace magnetar::replication {
namespace {

using common::ErrorCode;
using common::Result;
using common::Slice;
using common::Status;
using storage::testing::TempDir;

struct StorageNode {
  TempDir dir;
  std::unique_ptr<storage::Storage> local;
  std::unique_ptr<StorageServer> server;
};

// The nodes and the calls between them.
class Fabric {
 public:
  explicit Fabric(runtime::Reactor& reactor) : reactor_(reactor) {}
  runtime::Reactor& reactor() { return reactor_; }
  std::map<NodeId, std::unique_ptr<StorageNode>> nodes;
  std::set<NodeId> down;
  std::map<NodeId, std::string> zones;   // set before any writer starts
  std::map<NodeId, std::string> groups;  // storage groups, likewise

  void call(NodeId node, StorageMethod method, std::string payload, Transport::Done done) {
    reactor_.post_reliably([this, node, method, payload = std::move(payload), done]() {
      auto it = nodes.find(node);
      if (it == nodes.end() || down.count(node) != 0) {
        return done(Status::unavailable("storage node " + std::to_string(node) + " is down"));
      }
      auto reply = [this, done](std::string answer) {
        reactor_.post_reliably([done, answer = std::move(answer)]() { done(answer); });
      };
      StorageServer& s = *it->second->server;
      switch (method) {
        case StorageMethod::kAdd: return s.add(payload, reply);
        case StorageMethod::kRead: return s.read(payload, reply);
        case StorageMethod::kFence: return s.fence(payload, reply);
        case StorageMethod::kDelete: return s.remove(payload, reply);
      }
    });
  }

 private:
  runtime::Reactor& reactor_;
};

class FabricTransport : public Transport {
 public:
  FabricTransport(Fabric& fabric, NodeId self) : fabric_(fabric), self_(self) {}
  runtime::Reactor& reactor() override { return fabric_.reactor(); }
  NodeId self() const override { return self_; }
  std::vector<NodeId> live_storage_nodes() override {
    return fabric_.reactor().run_sync([this]() {
      std::vector<NodeId> out;
      for (const auto& [id, node] : fabric_.nodes) {
        if (fabric_.down.count(id) == 0) out.push_back(id);
      }
      return out;
    });
  }
  void call(NodeId node, StorageMethod method, std::string payload, Done done, unsigned) override {
    fabric_.call(node, method, std::move(payload), std::move(done));
  }
  std::string zone_of(NodeId node) override {
    auto it = fabric_.zones.find(node);
    return it == fabric_.zones.end() ? std::string() : it->second;
  }
  std::string group_of(NodeId node) override {
    auto it = fabric_.groups.find(node);
    return it == fabric_.groups.end() ? std::string() : it->second;
  }

 private:
  Fabric& fabric_;
  NodeId self_;
};

std::string entry_data(LedgerId ledger, EntryId entry) {
  return "ledger " + std::to_string(ledger) + " entry " + std::to_string(entry);
}

class ReplicatedStorageTest : public ::testing::Test {
 protected:
  ReplicatedStorageTest() : reactor_(0, "storage-net"), fabric_(reactor_) {}

  void SetUp() override {
    reactor_.start();
    store_ = std::make_unique<metadata::LevelDbStore>(metadata::LevelDbStore::Options{meta_dir_.path()});
    ASSERT_TRUE(store_->start().is_ok());
  }

  void TearDown() override {
    for (auto& w : writers_) w->stop();
    reactor_.run_sync([this]() {
      for (auto& [id, node] : fabric_.nodes) node->server->stop();
    });
    for (auto& [id, node] : fabric_.nodes) node->local->stop();
    writers_.clear();
    transports_.clear();
    reactor_.stop();
    fabric_.nodes.clear();
    store_->stop();
  }

  void add_nodes(int count) {
    for (int i = 1; i <= count; ++i) start_node(static_cast<NodeId>(i));
  }

  void start_node(NodeId id) {
    auto node = std::make_unique<StorageNode>();
    storage::StorageOptions options;
    options.directory = node->dir.path() + "/storage";
    node->local = storage::make_local_storage(options);
    ASSERT_TRUE(node->local->start().is_ok());
    node->server = std::make_unique<StorageServer>(*node->local, node->dir.path() + "/fences");
    node->server->set_self(id);
    ASSERT_TRUE(node->server->start().is_ok());
    fabric_.nodes[id] = std::move(node);
  }

  // The storage node `id` restarted as a process is: its local storage too.
  void restart_node(NodeId id) {
    StorageNode& node = *fabric_.nodes[id];
    reactor_.run_sync([&]() { node.server->stop(); });
    node.local->stop();
    storage::StorageOptions options;
    options.directory = node.dir.path() + "/storage";
    node.local = storage::make_local_storage(options);
    ASSERT_TRUE(node.local->start().is_ok());
    node.server = std::make_unique<StorageServer>(*node.local, node.dir.path() + "/fences");
    node.server->set_self(id);
    ASSERT_TRUE(node.server->start().is_ok());
  }

  // The storage node `id` restarted: a new server over the same local storage.
  void restart_server(NodeId id) {
    StorageNode& node = *fabric_.nodes[id];
    reactor_.run_sync([&]() { node.server->stop(); });
    node.server = std::make_unique<StorageServer>(*node.local, node.dir.path() + "/fences");
    node.server->set_self(id);
    ASSERT_TRUE(node.server->start().is_ok());
  }

  // A lost node's copies made again at the first pass, passes every 50 ms.
  static ReplicationSettings healing_at_once() {
    ReplicationSettings settings;
    settings.heal_grace = std::chrono::milliseconds(0);
    settings.heal_interval = std::chrono::milliseconds(50);
    return settings;
  }

  ReplicatedStorage& writer_on(NodeId self, ReplicationSettings settings = {}, bool heals = false) {
    transports_.push_back(std::make_unique<FabricTransport>(fabric_, self));
    writers_.push_back(std::make_unique<ReplicatedStorage>(*transports_.back(), *store_, *fabric_.nodes[self]->local,
                                                           settings));
    if (heals) writers_.back()->set_healer([]() { return true; });
    EXPECT_TRUE(writers_.back()->start().is_ok());
    return *writers_.back();
  }

  void set_down(NodeId id, bool down) {
    reactor_.run_sync([&]() {
      if (down) {
        fabric_.down.insert(id);
      } else {
        fabric_.down.erase(id);
      }
    });
  }

  LedgerMeta record(LedgerId id) {
    auto rec = metadata::blocking::get(*store_, ledger_key(id));
    EXPECT_TRUE(rec.is_ok()) << rec.status().to_string();
    auto meta = decode_ledger_meta(rec->value);
    EXPECT_TRUE(meta.is_ok());
    return meta.value();
  }

  Status add(storage::Storage& s, const storage::LedgerWriter& w, EntryId e) {
    return storage::testing::add_entry(s, w, e, Slice::copy_of(entry_data(w.ledger, e)));
  }

  // Every entry first..last read back through `s`, in as many reads as it takes.
  void expect_entries(storage::Storage& s, LedgerId id, EntryId first, EntryId last) {
    EntryId next = first;
    while (next <= last) {
      auto got = storage::testing::read_entries(s, id, next, last);
      ASSERT_TRUE(got.is_ok()) << got.status().to_string();
      ASSERT_FALSE(got->empty());
      for (const storage::Entry& e : *got) {
        ASSERT_EQ(e.id, next);
        EXPECT_EQ(e.data.to_string(), entry_data(id, next));
        ++next;
      }
    }
  }

  EntryId held_by(NodeId node, LedgerId id) {
    auto info = fabric_.nodes[node]->local->ledger_info(id);
    return info ? info->last_confirmed : storage::kNoEntry;
  }

  TempDir meta_dir_;
  runtime::Reactor reactor_;
  Fabric fabric_;
  std::unique_ptr<metadata::LevelDbStore> store_;
  std::vector<std::unique_ptr<FabricTransport>> transports_;
  std::vector<std::unique_ptr<ReplicatedStorage>> writers_;
};

TEST_F(ReplicatedStorageTest, EntriesGoToThreeNodesAndReadBack) {
  add_nodes(3);
  ReplicatedStorage& rs = writer_on(1);
  auto w = storage::testing::create_ledger(rs, 7);
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  for (EntryId e = 0; e < 20; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok());
  LedgerMeta meta = record(7);
  EXPECT_EQ(meta.state, LedgerState::kOpen);
  EXPECT_EQ(meta.ensemble, 3);
  EXPECT_EQ(meta.ack_quorum, 2);
  EXPECT_EQ(meta.fragments[0].nodes.front(), 1u);  // the writer's own node first
  // Acknowledged at two; the third copy follows.
  for (NodeId n = 1; n <= 3; ++n) {
    for (int i = 0; i < 500 && held_by(n, 7) < 19; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(held_by(n, 7), 19) << "node " << n;
  }
  expect_entries(rs, 7, 0, 19);
  auto closed = storage::testing::close_ledger(rs, 7);
  ASSERT_TRUE(closed.is_ok());
  EXPECT_EQ(*closed, 19);
  EXPECT_EQ(record(7).state, LedgerState::kClosed);
  EXPECT_EQ(record(7).last_entry, 19);
  EXPECT_EQ(add(rs, *w, 20).code(), ErrorCode::kFenced);
}

TEST_F(ReplicatedStorageTest, ANodeThatFailsIsReplacedWithoutFailingAnAdd) {
  add_nodes(4);
  ReplicatedStorage& rs = writer_on(1);
  auto w = storage::testing::create_ledger(rs, 8);
  ASSERT_TRUE(w.is_ok());
  for (EntryId e = 0; e < 10; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok());
  const NodeId victim = record(8).fragments[0].nodes[1];
  set_down(victim, true);
  for (EntryId e = 10; e < 30; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok()) << e;
  LedgerMeta meta = record(8);
  ASSERT_EQ(meta.fragments.size(), 2u);
  const auto& nodes = meta.fragments.back().nodes;
  EXPECT_EQ(std::count(nodes.begin(), nodes.end(), victim), 0);
  EXPECT_EQ(nodes.size(), 3u);
  // The node that took its place holds every entry of its fragment, those
  // acknowledged while the new fragment was being recorded included.
  NodeId replacement = 0;
  for (NodeId n : nodes) {
    const auto& old_nodes = meta.fragments[0].nodes;
    if (std::count(old_nodes.begin(), old_nodes.end(), n) == 0) replacement = n;
  }
  ASSERT_NE(replacement, 0u);
  const EntryId local_last = 29 - meta.fragments.back().first_entry;
  for (int i = 0; i < 500 && held_by(replacement, 8) < local_last; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(held_by(replacement, 8), local_last);
  // Every entry reads back with the failed node still down.
  expect_entries(rs, 8, 0, 29);
}

TEST_F(ReplicatedStorageTest, WithNoSpareNodeTheWriterGoesOnWhileAnAckQuorumIsLeft) {
  add_nodes(3);
  ReplicatedStorage& rs = writer_on(1);
  auto w = storage::testing::create_ledger(rs, 9);
  ASSERT_TRUE(w.is_ok());
  ASSERT_TRUE(add(rs, *w, 0).is_ok());
  set_down(3, true);
  for (EntryId e = 1; e < 10; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok());
  set_down(2, true);
  Status st = add(rs, *w, 10);
  EXPECT_EQ(st.code(), ErrorCode::kUnavailable) << st.to_string();
  // Nothing acknowledged is lost: the writer closes at its last confirmed entry.
  auto closed = storage::testing::close_ledger(rs, 9);
  ASSERT_TRUE(closed.is_ok()) << closed.status().to_string();
  EXPECT_EQ(*closed, 9);
}

TEST_F(ReplicatedStorageTest, ANewOwnerFencesRecoversAndClosesTheLedger) {
  add_nodes(3);
  ReplicatedStorage& old_owner = writer_on(1);
  auto w = storage::testing::create_ledger(old_owner, 10);
  ASSERT_TRUE(w.is_ok());
  for (EntryId e = 0; e < 30; ++e) ASSERT_TRUE(add(old_owner, *w, e).is_ok());
  // The nodes' last add confirmed lags the last entry (it travels with the
  // next add), so the recovery finds entry 29 by reading past it.
  ReplicatedStorage& new_owner = writer_on(2);
  auto closed = storage::testing::close_ledger(new_owner, 10);
  ASSERT_TRUE(closed.is_ok()) << closed.status().to_string();
  EXPECT_EQ(*closed, 29);
  EXPECT_EQ(record(10).state, LedgerState::kClosed);
  EXPECT_EQ(record(10).last_entry, 29);
  // The old writer can never again get an entry acknowledged.
  EXPECT_EQ(add(old_owner, *w, 30).code(), ErrorCode::kFenced);
  expect_entries(new_owner, 10, 0, 29);
  // A second close answers the same.
  EXPECT_EQ(*storage::testing::close_ledger(new_owner, 10), 29);
}

// A copy that fell behind (its node failed some adds and, with no node to
// spare, the writer went on without it) gets the entries it lacks after a
// recovery closed the ledger, so that it holds every entry the record says.
TEST_F(ReplicatedStorageTest, ARecoveryFillsTheEntriesACopyThatFellBehindLacks) {
  add_nodes(3);
  ReplicatedStorage& old_writer = writer_on(1);
  auto w = storage::testing::create_ledger(old_writer, 87);
  ASSERT_TRUE(w.is_ok());
  for (EntryId e = 0; e < 10; ++e) ASSERT_TRUE(add(old_writer, *w, e).is_ok());
  for (int i = 0; i < 500 && held_by(3, 87) < 9; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  set_down(3, true);
  for (EntryId e = 10; e < 20; ++e) ASSERT_TRUE(add(old_writer, *w, e).is_ok());
  EXPECT_EQ(held_by(3, 87), 9);
  set_down(3, false);
  ReplicatedStorage& owner = writer_on(2);
  ASSERT_EQ(*storage::testing::close_ledger(owner, 87), 19);
  // Node 3 holds all 20 entries (the recovered last ones as a run of their own).
  for (int i = 0; i < 500 && held_by(3, 87) < 19; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(held_by(3, 87), 19);
  set_down(1, true);
  set_down(2, true);
  expect_entries(owner, 87, 0, 19);
}

TEST_F(ReplicatedStorageTest, RecoveryGoesOnWithOneNodeDownAndRefusesWithTwo) {
  add_nodes(3);
  ReplicatedStorage& old_owner = writer_on(1);
  auto w = storage::testing::create_ledger(old_owner, 11);
  ASSERT_TRUE(w.is_ok());
  for (EntryId e = 0; e < 5; ++e) ASSERT_TRUE(add(old_owner, *w, e).is_ok());
  ReplicatedStorage& new_owner = writer_on(2);
  set_down(1, true);
  set_down(3, true);
  // Two of three down: an ack quorum of unfenced nodes could remain.
  auto refused = storage::testing::close_ledger(new_owner, 11);
  EXPECT_EQ(refused.status().code(), ErrorCode::kUnavailable) << refused.status().to_string();
  EXPECT_NE(record(11).state, LedgerState::kClosed);
  set_down(3, false);
  auto closed = storage::testing::close_ledger(new_owner, 11);
  ASSERT_TRUE(closed.is_ok()) << closed.status().to_string();
  EXPECT_EQ(*closed, 4);
  set_down(1, false);
  EXPECT_EQ(add(old_owner, *w, 5).code(), ErrorCode::kFenced);
}

TEST_F(ReplicatedStorageTest, DeletingALedgerRemovesItsRecordAndCopies) {
  add_nodes(3);
  ReplicatedStorage& rs = writer_on(1);
  auto w = storage::testing::create_ledger(rs, 12);
  ASSERT_TRUE(w.is_ok());
  for (EntryId e = 0; e < 3; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok());
  ASSERT_TRUE(storage::testing::close_ledger(rs, 12).is_ok());
  auto p = std::make_shared<std::promise<Status>>();
  auto f = p->get_future();
  rs.delete_ledger(12, [p](Status st) { p->set_value(st); });
  ASSERT_TRUE(storage::testing::wait_for(f).is_ok());
  EXPECT_EQ(metadata::blocking::get(*store_, ledger_key(12)).status().code(), ErrorCode::kNotFound);
  for (NodeId n = 1; n <= 3; ++n) {
    for (int i = 0; i < 500 && fabric_.nodes[n]->local->ledger_info(12).is_ok(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_FALSE(fabric_.nodes[n]->local->ledger_info(12).is_ok()) << "node " << n;
  }
}

TEST_F(ReplicatedStorageTest, TheCopiesALostNodeHeldAreMadeAgainElsewhere) {
  add_nodes(4);
  ReplicationSettings settings = healing_at_once();
  ReplicatedStorage& rs = writer_on(1, settings, /*heals=*/true);
  auto w = storage::testing::create_ledger(rs, 14);
  ASSERT_TRUE(w.is_ok());
  for (EntryId e = 0; e < 40; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok());
  ASSERT_EQ(*storage::testing::close_ledger(rs, 14), 39);
  const std::vector<NodeId> before = record(14).fragments[0].nodes;
  const NodeId lost = before[1];
  NodeId spare = 0;
  for (NodeId n = 1; n <= 4; ++n) {
    if (std::count(before.begin(), before.end(), n) == 0) spare = n;
  }
  set_down(lost, true);
  LedgerMeta healed;
  for (int i = 0; i < 1000; ++i) {
    healed = record(14);
    const auto& nodes = healed.fragments[0].nodes;
    if (std::count(nodes.begin(), nodes.end(), lost) == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto& nodes = healed.fragments[0].nodes;
  EXPECT_EQ(std::count(nodes.begin(), nodes.end(), lost), 0);
  EXPECT_EQ(std::count(nodes.begin(), nodes.end(), spare), 1);
  EXPECT_EQ(held_by(spare, 14), 39);  // every entry, before the record named it
  // Readable with two of the original three copies gone.
  set_down(before[0] == 1 ? before[2] : before[0], true);
  expect_entries(rs, 14, 0, 39);
}

TEST_F(ReplicatedStorageTest, HealingKeepsToItsRateAndPublishesItsProgress) {
  add_nodes(4);
  ReplicationSettings settings = healing_at_once();
  settings.heal_rate_bytes = 16 * 1024;  // copies go 4 KiB at a time, four a second
  ReplicatedStorage& rs = writer_on(1, settings, /*heals=*/true);
  auto w = storage::testing::create_ledger(rs, 15);
  ASSERT_TRUE(w.is_ok());
  const std::string kilobyte(1024, 'k');
  constexpr int kEntries = 48;
  for (EntryId e = 0; e < kEntries; ++e) {
    ASSERT_TRUE(storage::testing::add_entry(rs, *w, e, Slice::copy_of(kilobyte)).is_ok());
  }
  ASSERT_EQ(*storage::testing::close_ledger(rs, 15), kEntries - 1);
  const std::vector<NodeId> before = record(15).fragments[0].nodes;
  const NodeId lost = before[0] == 1 ? before[1] : before[0];
  const auto started = std::chrono::steady_clock::now();
  set_down(lost, true);
  // Part way: the record says which copy is being made and how far it got.
  bool seen_part_way = false;
  std::optional<HealingStatus> last;
  for (int i = 0; i < 3000; ++i) {
    auto rec = metadata::blocking::get(*store_, kHealingKey);
    if (rec.is_ok()) {
      auto status = decode_healing(rec->value);
      ASSERT_TRUE(status.is_ok());
      last = *status;
      if (status->copying && status->ledger == 15 && status->from_node == lost && status->copied_bytes > 0 &&
          status->copied_bytes < kEntries * 1024) {
        EXPECT_EQ(status->first_entry, 0);
        EXPECT_EQ(status->last_entry, kEntries - 1);
        EXPECT_GT(status->next_entry, 0);
        seen_part_way = true;
      }
      if (status->healed_fragments == 1 && !status->copying) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_TRUE(last.has_value());
  EXPECT_TRUE(seen_part_way);
  EXPECT_EQ(last->healed_fragments, 1u);
  EXPECT_EQ(last->healed_bytes, kEntries * 1024u);
  EXPECT_EQ(last->rate_limit_bytes, 16u * 1024);
  EXPECT_EQ(last->healer, 1u);
  // 48 KiB at 16 KiB/s: the first 4 KiB go at once, the rest no sooner than
  // the rate allows (a slow machine only takes longer).
  EXPECT_GE(secs, 44.0 / 16.0 - 0.25);
  const std::vector<NodeId> nodes = record(15).fragments[0].nodes;
  EXPECT_EQ(std::count(nodes.begin(), nodes.end(), lost), 0);
  auto got = storage::testing::read_entries(rs, 15, 0, kEntries - 1);
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  ASSERT_EQ(got->size(), static_cast<size_t>(kEntries));
  for (const storage::Entry& e : *got) EXPECT_EQ(e.data.to_string(), kilobyte);
}

TEST_F(ReplicatedStorageTest, ALostNodeIsHealedOntoNodesThatHoldOtherPartsOfTheLedger) {
  // Four nodes, a ledger of two fragments: one node failed mid-write and
  // the spare took its place. A node in both fragments is then lost: every
  // live node holds part of the ledger, and the copies are made anyway, as
  // runs of their own (fragment 0 on the spare, before the entries it
  // holds; fragment 1 on the node that failed, after its own).
  add_nodes(4);
  ReplicationSettings settings = healing_at_once();
  ReplicatedStorage& rs = writer_on(1, settings, /*heals=*/true);
  auto w = storage::testing::create_ledger(rs, 16);
  ASSERT_TRUE(w.is_ok());
  const std::vector<NodeId> first = record(16).fragments[0].nodes;
  ASSERT_EQ(first.size(), 3u);
  ASSERT_EQ(first[0], 1u);  // this member first
  const NodeId failing = first[1];
  const NodeId lost = first[2];
  NodeId spare = 0;
  for (NodeId n = 1; n <= 4; ++n) {
    if (std::count(first.begin(), first.end(), n) == 0) spare = n;
  }
  for (EntryId e = 0; e < 20; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok());
  set_down(failing, true);
  for (EntryId e = 20; e < 40; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok());
  ASSERT_EQ(*storage::testing::close_ledger(rs, 16), 39);
  set_down(failing, false);
  const LedgerMeta two = record(16);
  ASSERT_EQ(two.fragments.size(), 2u);
  ASSERT_EQ(std::count(two.fragments[1].nodes.begin(), two.fragments[1].nodes.end(), spare), 1);
  set_down(lost, true);
  LedgerMeta healed;
  for (int i = 0; i < 1000; ++i) {
    healed = record(16);
    const std::vector<NodeId> all = healed.all_nodes();
    if (std::count(all.begin(), all.end(), lost) == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::vector<NodeId> expected = first;
  std::replace(expected.begin(), expected.end(), lost, spare);
  EXPECT_EQ(healed.fragments[0].nodes, expected);
  ASSERT_EQ(healed.fragments.size(), 2u);
  const std::vector<NodeId>& last = healed.fragments[1].nodes;
  EXPECT_EQ(std::count(last.begin(), last.end(), lost), 0);
  EXPECT_EQ(std::count(last.begin(), last.end(), failing), 1);
  // Every entry from the two nodes that hold runs of both fragments alone.
  set_down(1, true);
  expect_entries(rs, 16, 0, 39);
}

TEST_F(ReplicatedStorageTest, AnOpenLedgersOlderFragmentIsHealedAndItsWriterGoesOn) {
  add_nodes(5);
  ReplicationSettings settings = healing_at_once();
  ReplicatedStorage& rs = writer_on(1, settings, /*heals=*/true);
  auto w = storage::testing::create_ledger(rs, 16);
  ASSERT_TRUE(w.is_ok());
  for (EntryId e = 0; e < 10; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok());
  // A node of the first fragment is lost: the writer moves on without it,
  // and the healer copies what it held to the one node left untouched.
  const NodeId lost = record(16).fragments[0].nodes[1];
  set_down(lost, true);
  for (EntryId e = 10; e < 20; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok());
  ASSERT_EQ(record(16).fragments.size(), 2u);
  auto first_names_lost = [&]() {
    const std::vector<NodeId> nodes = record(16).fragments[0].nodes;
    return std::count(nodes.begin(), nodes.end(), lost) != 0;
  };
  for (int i = 0; i < 1000 && first_names_lost(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_FALSE(first_names_lost());
  EXPECT_EQ(record(16).state, LedgerState::kOpen);
  // The writer's next change of the record meets the healer's: it keeps it
  // and goes on (another ensemble change, then its close).
  const std::vector<NodeId> second = record(16).fragments[1].nodes;
  const NodeId next_lost = second[1] == 1 ? second[2] : second[1];
  set_down(next_lost, true);
  for (EntryId e = 20; e < 30; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok()) << e;
  ASSERT_EQ(*storage::testing::close_ledger(rs, 16), 29);
  const LedgerMeta closed = record(16);
  EXPECT_EQ(closed.state, LedgerState::kClosed);
  EXPECT_EQ(std::count(closed.fragments[0].nodes.begin(), closed.fragments[0].nodes.end(), lost), 0);
  expect_entries(rs, 16, 0, 29);
}

TEST_F(ReplicatedStorageTest, ClosedLedgersLeaveMemoryAndAreReadFromTheirRecordsAgain) {
  add_nodes(3);
  ReplicationSettings settings;
  settings.max_cached_records = 2;
  ReplicatedStorage& rs = writer_on(1, settings);
  for (LedgerId id = 20; id < 25; ++id) {
    auto w = storage::testing::create_ledger(rs, id);
    ASSERT_TRUE(w.is_ok());
    for (EntryId e = 0; e < 3; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok());
    ASSERT_EQ(*storage::testing::close_ledger(rs, id), 2);
  }
  for (LedgerId id = 20; id < 25; ++id) {
    expect_entries(rs, id, 0, 2);
    EXPECT_EQ(*storage::testing::close_ledger(rs, id), 2);
  }
}

TEST_F(ReplicatedStorageTest, ADecommissionedNodesCopiesMoveOffItOpenLedgersToo) {
  add_nodes(4);
  ReplicationSettings settings;
  settings.heal_grace = std::chrono::hours(1);  // only the decommissioned node's copies move
  settings.heal_interval = std::chrono::milliseconds(50);
  ReplicatedStorage& rs = writer_on(1, settings, /*heals=*/true);
  auto closed = storage::testing::create_ledger(rs, 30);
  ASSERT_TRUE(closed.is_ok());
  for (EntryId e = 0; e < 20; ++e) ASSERT_TRUE(add(rs, *closed, e).is_ok());
  ASSERT_EQ(*storage::testing::close_ledger(rs, 30), 19);
  auto open = storage::testing::create_ledger(rs, 31);
  ASSERT_TRUE(open.is_ok());
  for (EntryId e = 0; e < 30; ++e) ASSERT_TRUE(add(rs, *open, e).is_ok());
  // A node with a copy of the open ledger, not the writer's own.
  const NodeId leaving = record(31).fragments[0].nodes[1];
  ASSERT_NE(leaving, 1u);
  auto names = [&](LedgerId id) {
    const std::vector<NodeId> nodes = record(id).all_nodes();
    return std::count(nodes.begin(), nodes.end(), leaving) != 0;
  };
  // Ledger 30 holds a copy there too, whatever its ensemble was.
  const bool closed_had_it = names(30);
  ASSERT_TRUE(metadata::blocking::put(*store_, draining_key(leaving), "0").is_ok());
  for (int i = 0; i < 1000 && (names(30) || names(31)); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(names(30)) << "the closed ledger's copy " << (closed_had_it ? "was not moved" : "appeared");
  EXPECT_FALSE(names(31)) << "the open ledger still names the decommissioned node";
  EXPECT_EQ(record(31).state, LedgerState::kOpen);
  // Moved whole: the new node holds the fragment from its first entry.
  ASSERT_EQ(record(31).fragments.size(), 1u);
  EXPECT_EQ(record(31).fragments[0].nodes.size(), 3u);
  NodeId target = 0;
  const std::vector<NodeId> moved_to = record(31).fragments[0].nodes;
  for (NodeId n : moved_to) {
    if (n != 1 && held_by(n, 31) != storage::kNoEntry && n != leaving) target = n;
  }
  // The writer goes on, and a new ledger is never placed on the node.
  for (EntryId e = 30; e < 50; ++e) ASSERT_TRUE(add(rs, *open, e).is_ok()) << e;
  EXPECT_FALSE(names(31));
  EXPECT_EQ(rs.draining(), std::vector<NodeId>{leaving});
  for (LedgerId id = 32; id < 40; ++id) {
    ASSERT_TRUE(storage::testing::create_ledger(rs, id).is_ok());
    EXPECT_FALSE(names(id)) << "ledger " << id;
    EXPECT_EQ(record(id).fragments[0].nodes.size(), 3u);
  }
  // The decommissioned node stopped: every entry reads back, and closing loses none.
  set_down(leaving, true);
  expect_entries(rs, 30, 0, 19);
  expect_entries(rs, 31, 0, 49);
  ASSERT_EQ(*storage::testing::close_ledger(rs, 31), 49);
  const std::vector<NodeId> final_nodes = record(31).fragments[0].nodes;
  for (NodeId n : final_nodes) {
    for (int i = 0; i < 500 && held_by(n, 31) < 49; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(held_by(n, 31), 49) << "node " << n << (n == target ? " (the new copy)" : "");
  }
}

// ---- striping: an ensemble larger than the write quorum ----

EntryId healed_total() {
  return static_cast<EntryId>(
      common::MetricsRegistry::global().counter("magnetar_replication_healed_entries_total", "").value());
}

storage::LedgerOptions striped(int ensemble, int write_quorum, int ack_quorum) {
  storage::LedgerOptions options;
  options.ensemble = ensemble;
  options.write_quorum = write_quorum;
  options.ack_quorum = ack_quorum;
  return options;
}

TEST_F(ReplicatedStorageTest, AStripedLedgerSpreadsEachEntryOverItsWriteQuorum) {
  add_nodes(3);
  ReplicatedStorage& rs = writer_on(1);
  auto w = storage::testing::create_ledger_with(rs, 80, striped(3, 2, 2));
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  for (EntryId e = 0; e < 15; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok());
  // A node restarted mid-ledger knows its stripe again: it takes the next
  // entries of its stripe rather than being replaced.
  const NodeId restarted = record(80).fragments[0].nodes[2];
  for (int i = 0; i < 500 && held_by(restarted, 80) < 9; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  restart_node(restarted);
  for (EntryId e = 15; e < 30; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok());
  LedgerMeta meta = record(80);
  EXPECT_EQ(meta.ensemble, 3);
  EXPECT_EQ(meta.write_quorum, 2);
  EXPECT_EQ(meta.fragments.size(), 1u) << "a node was replaced";
  // Each node holds two entries of every three: 20 of the 30.
  for (NodeId n = 1; n <= 3; ++n) {
    for (int i = 0; i < 500 && held_by(n, 80) < 19; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(held_by(n, 80), 19) << "node " << n;
  }
  expect_entries(rs, 80, 0, 29);
  // Read by another member (no record in memory), from the middle.
  ReplicatedStorage& reader = writer_on(2);
  expect_entries(reader, 80, 7, 29);
  ASSERT_EQ(*storage::testing::close_ledger(rs, 80), 29);
  // With any one node down, every entry is still read (from the other copy).
  for (NodeId down = 1; down <= 3; ++down) {
    set_down(down, true);
    expect_entries(reader, 80, 0, 29);
    set_down(down, false);
  }
}

// Many adds in flight on fresh copies: each node's first striped add records
// its run while the others wait, and they are stored in order after it.
TEST_F(ReplicatedStorageTest, AStripedLedgerTakesManyAddsInFlightOnFreshCopies) {
  add_nodes(3);
  ReplicatedStorage& rs = writer_on(1);
  auto w = storage::testing::create_ledger_with(rs, 85, striped(3, 2, 2));
  ASSERT_TRUE(w.is_ok());
  constexpr int kAdds = 300;
  // Shared: answers that come after a failed assertion find them still there.
  auto done = std::make_shared<std::vector<std::promise<Status>>>(kAdds);
  std::vector<std::future<Status>> results;
  for (auto& p : *done) results.push_back(p.get_future());
  for (EntryId e = 0; e < kAdds; ++e) {
    rs.add_entry(*w, e, Slice::copy_of(entry_data(85, e)), [done, e](Status st) { (*done)[e].set_value(st); });
  }
  for (EntryId e = 0; e < kAdds; ++e) ASSERT_TRUE(storage::testing::wait_for(results[e]).is_ok()) << e;
  EXPECT_EQ(record(85).fragments.size(), 1u) << "a node refused an add and was replaced";
  expect_entries(rs, 85, 0, kAdds - 1);
}

// Striped over every node there is, a lost node leaves write sets of one:
// the adds fail (the topic starts another ledger) rather than wait forever.
TEST_F(ReplicatedStorageTest, AStripedLedgerWithNoNodeToSpareFailsWhenAWriteSetLosesItsQuorum) {
  add_nodes(3);
  ReplicatedStorage& rs = writer_on(1);
  auto w = storage::testing::create_ledger_with(rs, 86, striped(3, 2, 2));
  ASSERT_TRUE(w.is_ok());
  for (EntryId e = 0; e < 6; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok());
  set_down(record(86).fragments[0].nodes[2], true);
  Status st = Status::ok();
  for (EntryId e = 6; e < 12 && st.is_ok(); ++e) st = add(rs, *w, e);
  EXPECT_EQ(st.code(), ErrorCode::kUnavailable) << st.to_string();
  ASSERT_TRUE(storage::testing::close_ledger(rs, 86).is_ok());
}

TEST_F(ReplicatedStorageTest, AStripedLedgersFailedNodeIsReplacedInItsPlace) {
  add_nodes(4);
  ReplicatedStorage& rs = writer_on(1);
  auto w = storage::testing::create_ledger_with(rs, 81, striped(3, 2, 2));
  ASSERT_TRUE(w.is_ok());
  for (EntryId e = 0; e < 12; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok());
  const std::vector<NodeId> before = record(81).fragments[0].nodes;
  const NodeId lost = before[1];
  ASSERT_NE(lost, 1u);
  set_down(lost, true);
  for (EntryId e = 12; e < 30; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok()) << e;
  LedgerMeta meta = record(81);
  ASSERT_EQ(meta.fragments.size(), 2u);
  const std::vector<NodeId>& after = meta.fragments[1].nodes;
  NodeId spare = 0;
  for (NodeId n = 1; n <= 4; ++n) {
    if (std::count(before.begin(), before.end(), n) == 0) spare = n;
  }
  // The new node took the lost one's position, so its stripe.
  EXPECT_EQ(after[1], spare);
  EXPECT_EQ(after[0], before[0]);
  EXPECT_EQ(after[2], before[2]);
  // It holds its stripe of the entries from the new fragment's first on.
  const EntryId from = meta.fragments[1].first_entry;
  const Stripe stripe = meta.stripe_of(1, spare);
  const EntryId expected = stripe.held_between(from, 30);
  for (int i = 0; i < 500 && held_by(spare, 81) < expected - 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(held_by(spare, 81), expected - 1);
  expect_entries(rs, 81, 0, 29);
  ASSERT_EQ(*storage::testing::close_ledger(rs, 81), 29);
}

TEST_F(ReplicatedStorageTest, AStripedLedgerIsRecoveredAndItsOldWriterRefused) {
  add_nodes(3);
  ReplicatedStorage& old_writer = writer_on(1);
  auto w = storage::testing::create_ledger_with(old_writer, 82, striped(3, 2, 2));
  ASSERT_TRUE(w.is_ok());
  for (EntryId e = 0; e < 25; ++e) ASSERT_TRUE(add(old_writer, *w, e).is_ok());
  // One node of the last entry's write set (of two) is lost: the recovery
  // finds the entry on the other, which keeps it, and closes the ledger.
  NodeId lost = 0;
  for (NodeId n : record(82).write_set(24)) {
    if (n != 2) lost = n;
  }
  ASSERT_NE(lost, 0u);
  set_down(lost, true);
  ReplicatedStorage& owner = writer_on(2);
  auto closed = storage::testing::close_ledger(owner, 82);
  ASSERT_TRUE(closed.is_ok()) << closed.status().to_string();
  EXPECT_EQ(*closed, 24);  // every acknowledged entry, none cut
  EXPECT_EQ(record(82).state, LedgerState::kClosed);
  EXPECT_NE(add(old_writer, *w, 25).code(), ErrorCode::kOk);
  expect_entries(owner, 82, 0, 24);
}

TEST_F(ReplicatedStorageTest, ALostNodesStripeIsHealedOntoAnother) {
  add_nodes(4);
  ReplicatedStorage& rs = writer_on(1, healing_at_once(), /*heals=*/true);
  auto w = storage::testing::create_ledger_with(rs, 83, striped(3, 2, 2));
  ASSERT_TRUE(w.is_ok());
  for (EntryId e = 0; e < 60; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok());
  ASSERT_EQ(*storage::testing::close_ledger(rs, 83), 59);
  const std::vector<NodeId> before = record(83).fragments[0].nodes;
  const NodeId lost = before[2];
  NodeId spare = 0;
  for (NodeId n = 1; n <= 4; ++n) {
    if (std::count(before.begin(), before.end(), n) == 0) spare = n;
  }
  const EntryId healed_before = healed_total();
  set_down(lost, true);
  LedgerMeta healed;
  for (int i = 0; i < 1000; ++i) {
    healed = record(83);
    if (healed.fragments[0].nodes[2] != lost) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(healed.fragments[0].nodes[2], spare);
  // Only the lost node's stripe was copied: 40 of the 60 entries.
  EXPECT_EQ(held_by(spare, 83), 39);
  EXPECT_EQ(healed_total() - healed_before, 40);
  // With another of the original nodes gone too, every entry still reads
  // back: each keeps one copy, on the spare or the third node.
  set_down(before[0], true);
  expect_entries(rs, 83, 0, 59);
}

TEST_F(ReplicatedStorageTest, AStripedCopyMovesOffADecommissionedNodeWhileItsWriterGoesOn) {
  add_nodes(4);
  ReplicationSettings settings;
  settings.heal_grace = std::chrono::hours(1);
  settings.heal_interval = std::chrono::milliseconds(50);
  ReplicatedStorage& rs = writer_on(1, settings, /*heals=*/true);
  auto w = storage::testing::create_ledger_with(rs, 84, striped(3, 2, 2));
  ASSERT_TRUE(w.is_ok());
  for (EntryId e = 0; e < 30; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok());
  const NodeId leaving = record(84).fragments[0].nodes[1];
  ASSERT_NE(leaving, 1u);
  auto names_leaving = [&]() {
    const std::vector<NodeId> nodes = record(84).all_nodes();
    return std::count(nodes.begin(), nodes.end(), leaving) != 0;
  };
  ASSERT_TRUE(metadata::blocking::put(*store_, draining_key(leaving), "0").is_ok());
  for (int i = 0; i < 1000 && names_leaving(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_FALSE(names_leaving());
  LedgerMeta meta = record(84);
  ASSERT_EQ(meta.fragments.size(), 1u);  // moved whole, into the leaving node's position
  const NodeId target = meta.fragments[0].nodes[1];
  for (EntryId e = 30; e < 50; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok()) << e;
  set_down(leaving, true);
  expect_entries(rs, 84, 0, 49);
  ASSERT_EQ(*storage::testing::close_ledger(rs, 84), 49);
  // The new node holds the leaving one's stripe, no more.
  const EntryId expected = record(84).stripe_of(0, target).held_between(0, 50);
  for (int i = 0; i < 500 && held_by(target, 84) < expected - 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(held_by(target, 84), expected - 1);
  EXPECT_EQ(expected, 34);
}

TEST_F(ReplicatedStorageTest, CopiesSpreadAcrossZones) {
  add_nodes(6);
  fabric_.zones = {{1, "a"}, {2, "a"}, {3, "b"}, {4, "b"}, {5, "c"}, {6, "c"}};
  ReplicatedStorage& rs = writer_on(1);
  auto zones_of = [&](const std::vector<NodeId>& nodes) {
    std::set<std::string> zones;
    for (NodeId n : nodes) zones.insert(fabric_.zones[n]);
    return zones.size();
  };
  for (LedgerId id = 40; id < 60; ++id) {
    ASSERT_TRUE(storage::testing::create_ledger(rs, id).is_ok());
    const std::vector<NodeId> nodes = record(id).fragments[0].nodes;
    ASSERT_EQ(nodes.size(), 3u);
    EXPECT_EQ(nodes[0], 1u);
    EXPECT_EQ(zones_of(nodes), 3u) << "ledger " << id;
  }
  // A node that fails is replaced from the zone it leaves without a copy.
  auto w = storage::testing::create_ledger(rs, 60);
  ASSERT_TRUE(w.is_ok());
  ASSERT_TRUE(add(rs, *w, 0).is_ok());
  const NodeId lost = record(60).fragments[0].nodes[2];
  set_down(lost, true);
  for (EntryId e = 1; e < 5; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok());
  const std::vector<NodeId> now = record(60).fragments.back().nodes;
  EXPECT_EQ(std::count(now.begin(), now.end(), lost), 0);
  EXPECT_EQ(zones_of(now), 3u);
}

TEST_F(ReplicatedStorageTest, ANamespacesStorageGroupsHoldEveryCopyForTheLedgersLife) {
  add_nodes(6);
  fabric_.groups = {{1, "shared"}, {2, "tenant"}, {3, "tenant"}, {4, "tenant"}, {5, "tenant"}, {6, "shared"}};
  ReplicatedStorage& rs = writer_on(1);
  storage::LedgerOptions options;
  options.affinity_primary = "tenant";
  auto w = storage::testing::create_ledger_with(rs, 70, options);
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  auto in_tenant = [&](const std::vector<NodeId>& nodes) {
    return std::all_of(nodes.begin(), nodes.end(), [&](NodeId n) { return fabric_.groups[n] == "tenant"; });
  };
  LedgerMeta meta = record(70);
  EXPECT_EQ(meta.affinity_primary, "tenant");
  ASSERT_EQ(meta.fragments[0].nodes.size(), 3u);
  EXPECT_TRUE(in_tenant(meta.fragments[0].nodes));  // not even the writer's own node, which is not in the group
  for (EntryId e = 0; e < 5; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok());
  // A node that fails is replaced by the group's last one, not by a shared node.
  set_down(meta.fragments[0].nodes[0], true);
  for (EntryId e = 5; e < 10; ++e) ASSERT_TRUE(add(rs, *w, e).is_ok());
  meta = record(70);
  EXPECT_EQ(meta.fragments.size(), 2u);
  EXPECT_TRUE(in_tenant(meta.fragments.back().nodes));
  expect_entries(rs, 70, 0, 9);
  // A group with too few live nodes refuses the ledger, saying why.
  options.affinity_primary = "nowhere";
  auto refused = storage::testing::create_ledger_with(rs, 71, options);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("storage groups 'nowhere'"), std::string::npos)
      << refused.status().to_string();
}

TEST_F(ReplicatedStorageTest, AnOldWriterIsRefusedOnceARecoveryFencedEvenAfterTheNodesRestart) {
  add_nodes(3);
  ReplicatedStorage& old_owner = writer_on(1);
  auto w = storage::testing::create_ledger(old_owner, 15);
  ASSERT_TRUE(w.is_ok());
  for (EntryId e = 0; e < 10; ++e) ASSERT_TRUE(add(old_owner, *w, e).is_ok());
  ReplicatedStorage& new_owner = writer_on(2);
  ASSERT_EQ(*storage::testing::close_ledger(new_owner, 15), 9);
  // Every storage node restarts: the fences were synced before they were
  // answered, so they hold, and the old writer, which still believes the
  // ledger open, has no node store its next entry.
  for (NodeId n = 1; n <= 3; ++n) restart_server(n);
  EXPECT_EQ(add(old_owner, *w, 10).code(), ErrorCode::kFenced);
  for (NodeId n = 1; n <= 3; ++n) EXPECT_EQ(held_by(n, 15), 9) << "node " << n;
  EXPECT_EQ(record(15).last_entry, 9);
  expect_entries(new_owner, 15, 0, 9);
}

// ---- the storage node's protocol, request by request ----

std::string add_request(LedgerId ledger, EntryId entry, bool recovery, bool new_run = false) {
  flatbuffers::FlatBufferBuilder b(128);
  const std::string data = entry_data(ledger, entry);
  auto bytes = b.CreateVector(reinterpret_cast<const uint8_t*>(data.data()), data.size());
  b.Finish(fb::CreateAddEntry(b, 1, ledger, entry, entry - 1, recovery, 255, 0, bytes, new_run));
  return cluster::record_bytes(b);
}

std::string fence_request(LedgerId ledger) {
  flatbuffers::FlatBufferBuilder b(32);
  b.Finish(fb::CreateFence(b, 1, ledger, true));
  return cluster::record_bytes(b);
}

std::string delete_request(LedgerId ledger) {
  flatbuffers::FlatBufferBuilder b(32);
  b.Finish(fb::CreateDeleteReplica(b, 1, ledger));
  return cluster::record_bytes(b);
}

std::string read_request(LedgerId ledger, EntryId first, EntryId last) {
  flatbuffers::FlatBufferBuilder b(32);
  b.Finish(fb::CreateReadEntries(b, 1, ledger, first, last, 0));
  return cluster::record_bytes(b);
}

class StorageServerTest : public ReplicatedStorageTest {
 protected:
  std::string ask(StorageMethod method, std::string payload) {
    auto p = std::make_shared<std::promise<std::string>>();
    auto f = p->get_future();
    fabric_.call(1, method, std::move(payload), [p](Result<std::string> r) { p->set_value(r ? *r : ""); });
    return storage::testing::wait_for(f);
  }
  Status add_to_node(LedgerId ledger, EntryId entry, bool recovery = false, bool new_run = false) {
    return decode_outcome(ask(StorageMethod::kAdd, add_request(ledger, entry, recovery, new_run)));
  }
  // Reads first..last from node 1: the entries it returned, and the answer's last_held.
  std::pair<std::vector<EntryId>, EntryId> read_from_node(LedgerId ledger, EntryId first, EntryId last) {
    std::string answer = ask(StorageMethod::kRead, read_request(ledger, first, last));
    const auto* read = cluster::verified_record<fb::ReadReply>(answer);
    EXPECT_NE(read, nullptr);
    std::vector<EntryId> got;
    if (read == nullptr) return {got, -2};
    EXPECT_EQ(read->code(), 0);
    EXPECT_TRUE(read->held());
    for (const auto* e : *read->entries()) {
      got.push_back(e->entry());
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(e->data()->data()), e->data()->size()),
                entry_data(ledger, e->entry()));
    }
    return {got, read->last_held()};
  }
};

TEST_F(StorageServerTest, AHealerStartsRunsOfItsOwnThatOutliveARestart) {
  add_nodes(1);
  for (EntryId e = 10; e < 13; ++e) ASSERT_TRUE(add_to_node(9, e).is_ok());
  // A writer's hole is still refused; a healer's copy of another fragment,
  // before or after the entries held, starts a run.
  EXPECT_EQ(add_to_node(9, 20).code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(add_to_node(9, 2).code(), ErrorCode::kFailedPrecondition);
  ASSERT_TRUE(add_to_node(9, 20, true, /*new_run=*/true).is_ok());
  ASSERT_TRUE(add_to_node(9, 21, true).is_ok());
  ASSERT_TRUE(add_to_node(9, 0, true, /*new_run=*/true).is_ok());
  ASSERT_TRUE(add_to_node(9, 1, true).is_ok());
  // Adds go to the last run only; an entry held is stored once.
  EXPECT_EQ(add_to_node(9, 22, true).code(), ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(add_to_node(9, 11).is_ok());
  EXPECT_EQ(held_by(1, 9), 6);  // 7 local entries
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(read_from_node(9, 10, 30).first, (std::vector<EntryId>{10, 11, 12}));
    EXPECT_EQ(read_from_node(9, 20, 30).first, (std::vector<EntryId>{20, 21}));
    EXPECT_EQ(read_from_node(9, 0, 30).first, (std::vector<EntryId>{0, 1}));
    // An entry between runs is absent: the answer says the run before it ends earlier.
    auto gap = read_from_node(9, 15, 15);
    EXPECT_TRUE(gap.first.empty());
    EXPECT_EQ(gap.second, 12);
    EXPECT_LT(read_from_node(9, 5, 5).second, 5);
    restart_node(1);  // the runs are found again on disk
  }
  ASSERT_TRUE(add_to_node(9, 2, true).is_ok());  // the last run goes on
  EXPECT_EQ(read_from_node(9, 0, 30).first, (std::vector<EntryId>{0, 1, 2}));
  // Deleting the copy forgets its runs: a new copy starts afresh.
  EXPECT_EQ(decode_outcome(ask(StorageMethod::kDelete, delete_request(9))).code(), ErrorCode::kOk);
  restart_node(1);
  ASSERT_TRUE(add_to_node(9, 5).is_ok());
  EXPECT_EQ(read_from_node(9, 5, 5).first, (std::vector<EntryId>{5}));
}

TEST_F(StorageServerTest, AStripedCopyHoldsItsStripeOnlyAndKnowsItAfterARestart) {
  add_nodes(1);
  // Node 1 second of three, two copies of each entry: entries 0, 1, 3, 4, 6, 7, ...
  const StripeInfo stripe{{3, 1, 2}, 2};
  auto striped_add = [&](EntryId e, const StripeInfo& s) {
    const std::string data = entry_data(12, e);
    return decode_outcome(ask(StorageMethod::kAdd, encode_add(12, e, e - 1, false, 255, 0,
                                                              reinterpret_cast<const uint8_t*>(data.data()),
                                                              data.size(), false, &s)));
  };
  ASSERT_TRUE(striped_add(0, stripe).is_ok());
  ASSERT_TRUE(striped_add(1, stripe).is_ok());
  EXPECT_EQ(striped_add(2, stripe).code(), ErrorCode::kInvalidArgument);  // not its stripe
  EXPECT_EQ(striped_add(6, stripe).code(), ErrorCode::kFailedPrecondition);  // a hole: 3 and 4 come first
  ASSERT_TRUE(striped_add(3, stripe).is_ok());
  ASSERT_TRUE(striped_add(4, stripe).is_ok());
  EXPECT_TRUE(striped_add(3, stripe).is_ok());  // sent twice, stored once
  EXPECT_EQ(striped_add(5, StripeInfo{{7, 8, 9}, 2}).code(), ErrorCode::kInvalidArgument);  // not in the ensemble
  EXPECT_EQ(add_to_node(12, 6).code(), ErrorCode::kFailedPrecondition);  // not striped as the copy is
  EXPECT_EQ(held_by(1, 12), 3);  // 4 local entries
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(read_from_node(12, 0, 10).first, (std::vector<EntryId>{0, 1, 3, 4}));
    EXPECT_EQ(read_from_node(12, 2, 10).first, (std::vector<EntryId>{3, 4}));
    auto absent = read_from_node(12, 5, 5);  // past the copy's last
    EXPECT_TRUE(absent.first.empty());
    EXPECT_EQ(absent.second, 4);
    restart_node(1);  // the stripe is found again on disk
  }
  ASSERT_TRUE(striped_add(6, stripe).is_ok());
  EXPECT_EQ(read_from_node(12, 4, 10).first, (std::vector<EntryId>{4, 6}));
}

TEST_F(StorageServerTest, ACopyIsContiguousAndAnEntrySentTwiceIsStoredOnce) {
  add_nodes(1);
  ASSERT_TRUE(add_to_node(5, 0).is_ok());
  ASSERT_TRUE(add_to_node(5, 1).is_ok());
  EXPECT_EQ(add_to_node(5, 3).code(), ErrorCode::kFailedPrecondition);  // a hole
  EXPECT_TRUE(add_to_node(5, 1).is_ok());                                // again: stored once
  EXPECT_EQ(held_by(1, 5), 1);
}

TEST_F(StorageServerTest, AFencedCopyTakesOnlyRecoveryAddsAndStaysFencedAfterARestart) {
  add_nodes(1);
  ASSERT_TRUE(add_to_node(6, 0).is_ok());
  ASSERT_TRUE(add_to_node(6, 1).is_ok());
  const std::string fence_answer = ask(StorageMethod::kFence, fence_request(6));
  const auto* fenced = cluster::verified_record<fb::FenceReply>(fence_answer);
  ASSERT_NE(fenced, nullptr);
  EXPECT_EQ(fenced->code(), 0);
  EXPECT_TRUE(fenced->held());
  EXPECT_EQ(fenced->last_held(), 1);
  EXPECT_EQ(fenced->lac(), 0);
  EXPECT_EQ(add_to_node(6, 2).code(), ErrorCode::kFenced);
  EXPECT_TRUE(add_to_node(6, 2, /*recovery=*/true).is_ok());
  restart_server(1);
  EXPECT_EQ(add_to_node(6, 3).code(), ErrorCode::kFenced);
  // The copy found again on disk: its entries and where it starts.
  std::string answer = ask(StorageMethod::kRead, read_request(6, 0, 10));
  const auto* read = cluster::verified_record<fb::ReadReply>(answer);
  ASSERT_NE(read, nullptr);
  EXPECT_EQ(read->code(), 0);
  EXPECT_EQ(read->first_held(), 0);
  EXPECT_EQ(read->last_held(), 2);
  ASSERT_EQ(read->entries()->size(), 3u);
  for (flatbuffers::uoffset_t k = 0; k < 3; ++k) {
    const auto* e = read->entries()->Get(k);
    EXPECT_EQ(e->entry(), static_cast<EntryId>(k));
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(e->data()->data()), e->data()->size()), entry_data(6, k));
  }
}

TEST_F(StorageServerTest, EveryFenceAnswerWaitsForTheFenceOnDisk) {
  add_nodes(1);
  ASSERT_TRUE(add_to_node(7, 0).is_ok());
  // Two recoveries fence at once. The second must not be told "fenced"
  // before the first one's fence is synced: its answer comes after.
  std::vector<int> order;
  std::promise<void> both;
  auto ask_fence = [&](int who) {
    fabric_.call(1, StorageMethod::kFence, fence_request(7), [&, who](Result<std::string> r) {
      const auto* f = r ? cluster::verified_record<fb::FenceReply>(*r) : nullptr;
      EXPECT_TRUE(f != nullptr && f->code() == 0);
      order.push_back(who);
      if (order.size() == 2) both.set_value();
    });
  };
  reactor_.run_sync([&]() {
    ask_fence(1);
    ask_fence(2);
  });
  ASSERT_EQ(both.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_EQ(add_to_node(7, 1).code(), ErrorCode::kFenced);
  restart_server(1);
  EXPECT_EQ(add_to_node(7, 1).code(), ErrorCode::kFenced);
}

TEST_F(StorageServerTest, GarbageGetsAClearErrorAndTheCopiesAreIntact) {
  add_nodes(1);
  ASSERT_TRUE(add_to_node(4, 0).is_ok());
  for (StorageMethod m : {StorageMethod::kAdd, StorageMethod::kDelete}) {
    Status st = decode_outcome(ask(m, "\x01\x02garbage"));
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.to_string();
  }
  const std::string read_answer = ask(StorageMethod::kRead, std::string(40, '\xff'));
  const auto* read = cluster::verified_record<fb::ReadReply>(read_answer);
  ASSERT_NE(read, nullptr);
  EXPECT_EQ(read->code(), static_cast<uint8_t>(ErrorCode::kInvalidArgument));
  const std::string fence_answer = ask(StorageMethod::kFence, "x");
  const auto* fence = cluster::verified_record<fb::FenceReply>(fence_answer);
  ASSERT_NE(fence, nullptr);
  EXPECT_EQ(fence->code(), static_cast<uint8_t>(ErrorCode::kInvalidArgument));
  ASSERT_TRUE(add_to_node(4, 1).is_ok());
  EXPECT_EQ(held_by(1, 4), 1);
}

TEST_F(StorageServerTest, AWipedNodeNeverAnswersAbsentForALedgerItMayHaveHeld) {
  add_nodes(1);
  reactor_.run_sync([&]() { fabric_.nodes[1]->server->set_wiped_below(100); });
  // Ledger 5 existed before the wipe: an error, which a recovery does not
  // count as "absent"; ledger 200 is new: a plain "not held".
  const std::string old_read = ask(StorageMethod::kRead, read_request(5, 0, 0));
  const auto* r = cluster::verified_record<fb::ReadReply>(old_read);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->code(), static_cast<uint8_t>(ErrorCode::kCorruption));
  const std::string old_fence = ask(StorageMethod::kFence, fence_request(5));
  const auto* f = cluster::verified_record<fb::FenceReply>(old_fence);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->code(), static_cast<uint8_t>(ErrorCode::kCorruption));
  EXPECT_EQ(add_to_node(6, 3).code(), ErrorCode::kCorruption);  // 5 is fenced now: another old one
  const std::string new_read = ask(StorageMethod::kRead, read_request(200, 0, 0));
  const auto* n = cluster::verified_record<fb::ReadReply>(new_read);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->code(), 0);
  EXPECT_FALSE(n->held());
  EXPECT_TRUE(add_to_node(200, 0).is_ok());
}

TEST_F(ReplicatedStorageTest, ARecoveryDoesNotCutAnEntryBecauseAWipedNodeLacksIt) {
  add_nodes(3);
  ReplicatedStorage& old_owner = writer_on(1);
  auto w = storage::testing::create_ledger(old_owner, 13);
  ASSERT_TRUE(w.is_ok());
  for (EntryId e = 0; e < 5; ++e) ASSERT_TRUE(add(old_owner, *w, e).is_ok());
  // Node 2's disk is replaced (its copy gone) and node 1 is down: only node 3
  // still has the entries, and node 2 must not vouch that they are absent.
  reactor_.run_sync([&]() {
    StorageNode& two = *fabric_.nodes[2];
    two.local->delete_ledger(13, [](Status) {});
    two.server->stop();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  restart_server(2);
  reactor_.run_sync([&]() { fabric_.nodes[2]->server->set_wiped_below(100); });
  set_down(1, true);
  ReplicatedStorage& new_owner = writer_on(2);
  auto closed = storage::testing::close_ledger(new_owner, 13);
  // Node 3's copy alone cannot fence an ack quorum away: the recovery waits
  // rather than close the ledger short.
  EXPECT_FALSE(closed.is_ok());
  EXPECT_NE(record(13).state, LedgerState::kClosed);
}

}  // namespace
}  // namespace magnetar::replication
