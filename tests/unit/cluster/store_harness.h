// Store harnesses: one way to drive any metadata::Store backend from a test,
// so the same conformance tests run against each.
//
// LevelDbHarness: a LevelDbStore in a temporary directory; its callbacks run
// on the store's own thread, so waiting is polling with a time bound.
// RaftStoreCluster: a RaftStore on every member of a FixtureCluster, each
// member with its own StoreMachine (database in a temporary directory);
// everything runs on the test thread, and waiting is stepping the fixture a
// bounded number of times. Its store() is the leader's.
//
// The call helpers (put, get, ...) make one call and wait for its answer; an
// answer that does not come within the bound is reported as Timeout.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cluster/raft_store.h"
#include "cluster/store_machine.h"
#include "metadata/leveldb_store.h"
#include "metadata/store.h"
#include "unit/cluster/fixture_cluster.h"

namespace magnetar::cluster::testing {

class StoreHarness {
 public:
  virtual ~StoreHarness() = default;
  virtual metadata::Store& store() = 0;
  // Lets the store work until `done` holds; false if it did not within the
  // harness's bound.
  virtual bool run_until(const std::function<bool()>& done) = 0;
};

// A temporary directory, removed with this object.
class TempDir {
 public:
  explicit TempDir(const std::string& name);
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

class LevelDbHarness final : public StoreHarness {
 public:
  LevelDbHarness();
  metadata::Store& store() override { return *store_; }
  bool run_until(const std::function<bool()>& done) override;

 private:
  TempDir dir_;
  std::unique_ptr<metadata::LevelDbStore> store_;
};

class RaftStoreCluster final : public StoreHarness {
 public:
  // `members` voters; waits for the first leader.
  explicit RaftStoreCluster(unsigned members, const ConsensusOptions& options = {});
  ~RaftStoreCluster() override;

  // The current leader's store (the last known one while there is none).
  metadata::Store& store() override;
  bool run_until(const std::function<bool()>& done) override;

  FixtureCluster& fixture() { return *cluster_; }
  RaftStore& store(unsigned i) { return *stores_[i]; }
  StoreMachine& machine(unsigned i) { return dynamic_cast<StoreMachine&>(cluster_->state_machine(i)); }
  unsigned leader() const { return leader_; }
  // Steps until a leader other than `old` is elected; false if none was.
  bool await_new_leader(unsigned old);
  // Steps until every member in `members` applied what the leader applied.
  bool await_caught_up(const std::vector<unsigned>& members);
  // Fixture steps taken so far: the clock of a history.
  uint64_t steps() const { return steps_; }

 private:
  TempDir dir_;
  std::unique_ptr<FixtureCluster> cluster_;
  std::vector<std::unique_ptr<RaftStore>> stores_;
  unsigned leader_ = 0;
  uint64_t steps_ = 0;
};

// Waits for the answer of `call`, made with a callback that records it.
template <typename T>
std::optional<T> await(StoreHarness& h, const std::function<void(std::function<void(T)>)>& call) {
  struct Box {
    std::mutex mu;
    std::optional<T> value;
  };
  auto box = std::make_shared<Box>();
  call([box](T v) {
    std::lock_guard lock(box->mu);
    box->value = std::move(v);
  });
  h.run_until([&] {
    std::lock_guard lock(box->mu);
    return box->value.has_value();
  });
  std::lock_guard lock(box->mu);
  return std::move(box->value);
}

common::Result<metadata::Stat> put(StoreHarness& h, metadata::Store& s, const std::string& key,
                                   const std::string& value, metadata::PutOptions options = {});
common::Result<metadata::Record> get(StoreHarness& h, metadata::Store& s, const std::string& key);
common::Status del(StoreHarness& h, metadata::Store& s, const std::string& key,
                   int64_t expected_version = metadata::kAnyVersion);
common::Result<std::vector<std::string>> list(StoreHarness& h, metadata::Store& s, const std::string& key);
common::Result<metadata::SessionId> open_session(StoreHarness& h, metadata::Store& s);
common::Status close_session(StoreHarness& h, metadata::Store& s, metadata::SessionId session);

// Collects watch notifications; safe to read while a store thread adds.
class Events {
 public:
  metadata::WatchCallback callback();
  size_t size();
  std::vector<metadata::Event> seen();

 private:
  std::mutex mu_;
  std::vector<metadata::Event> seen_;
};

// Every key of a state with its value, version and owner, found by walking
// list_children from "/": what a member holds, comparable across members.
struct KeyDump {
  std::string value;
  int64_t version = 0;
  metadata::SessionId session = 0;
  bool operator==(const KeyDump&) const = default;
};
std::map<std::string, KeyDump> dump(metadata::StoreState& state);

}  // namespace magnetar::cluster::testing
