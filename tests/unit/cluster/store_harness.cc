#include "unit/cluster/store_harness.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace magnetar::cluster::testing {

using common::Result;
using common::Status;
using metadata::Record;
using metadata::SessionId;
using metadata::Stat;
using metadata::Store;

namespace {

constexpr auto kWait = std::chrono::seconds(10);

template <typename T>
Result<T> answered(std::optional<Result<T>> r) {
  if (!r) return Status::timeout("no answer");
  return std::move(*r);
}

Status answered(std::optional<Status> s) { return s ? std::move(*s) : Status::timeout("no answer"); }

}  // namespace

TempDir::TempDir(const std::string& name) {
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test_name = test ? std::string(test->test_suite_name()) + "." + test->name() : "none";
  for (char& ch : test_name) {
    if (ch == '/') ch = '_';
  }
  path_ = std::filesystem::temp_directory_path() /
          ("magnetar-" + name + "-" + std::to_string(::getpid()) + "-" + test_name);
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

LevelDbHarness::LevelDbHarness() : dir_("leveldb-store") {
  store_ = std::make_unique<metadata::LevelDbStore>(metadata::LevelDbStore::Options{(dir_.path() / "db").string()});
  EXPECT_TRUE(store_->start().is_ok());
}

bool LevelDbHarness::run_until(const std::function<bool()>& done) {
  auto deadline = std::chrono::steady_clock::now() + kWait;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

RaftStoreCluster::RaftStoreCluster(unsigned members, const ConsensusOptions& options) : dir_("raft-store") {
  auto make = [this](unsigned i) -> std::unique_ptr<StateMachine> {
    auto machine = std::make_unique<StoreMachine>((dir_.path() / ("member-" + std::to_string(i))).string());
    Status opened = machine->open();
    EXPECT_TRUE(opened.is_ok()) << opened.to_string();
    return machine;
  };
  cluster_ = std::make_unique<FixtureCluster>(members, options, make);
  for (unsigned i = 0; i < members; i++) stores_.push_back(std::make_unique<RaftStore>(cluster_->node(i), machine(i)));
  auto leader = cluster_->step_until_leader();
  EXPECT_TRUE(leader.has_value());
  if (leader) leader_ = *leader;
}

RaftStoreCluster::~RaftStoreCluster() {
  stores_.clear();
  cluster_.reset();  // before dir_ goes
}

Store& RaftStoreCluster::store() {
  if (auto leader = cluster_->leader()) leader_ = *leader;
  return *stores_[leader_];
}

bool RaftStoreCluster::run_until(const std::function<bool()>& done) {
  return cluster_->step_until([&] {
    if (done()) return true;
    steps_++;
    return false;
  });
}

bool RaftStoreCluster::await_new_leader(unsigned old) {
  bool elected = run_until([&] { return cluster_->leader() && *cluster_->leader() != old; });
  if (elected) leader_ = *cluster_->leader();
  return elected;
}

bool RaftStoreCluster::await_caught_up(const std::vector<unsigned>& members) {
  LogIndex target = cluster_->node(leader_).applied_index();
  return run_until([&] {
    for (unsigned i : members) {
      if (cluster_->node(i).applied_index() < target) return false;
    }
    return true;
  });
}

Result<Stat> put(StoreHarness& h, Store& s, const std::string& key, const std::string& value,
                 metadata::PutOptions options) {
  return answered(await<Result<Stat>>(h, [&](auto done) { s.put(key, value, options, done); }));
}

Result<Record> get(StoreHarness& h, Store& s, const std::string& key) {
  return answered(await<Result<Record>>(h, [&](auto done) { s.get(key, done); }));
}

Status del(StoreHarness& h, Store& s, const std::string& key, int64_t expected_version) {
  return answered(await<Status>(h, [&](auto done) { s.del(key, expected_version, done); }));
}

Result<std::vector<std::string>> list(StoreHarness& h, Store& s, const std::string& key) {
  return answered(await<Result<std::vector<std::string>>>(h, [&](auto done) { s.list_children(key, done); }));
}

Result<SessionId> open_session(StoreHarness& h, Store& s) {
  return answered(await<Result<SessionId>>(h, [&](auto done) { s.open_session(done); }));
}

Status close_session(StoreHarness& h, Store& s, SessionId session) {
  return answered(await<Status>(h, [&](auto done) { s.close_session(session, done); }));
}

metadata::WatchCallback Events::callback() {
  return [this](const metadata::Event& e) {
    std::lock_guard lock(mu_);
    seen_.push_back(e);
  };
}

size_t Events::size() {
  std::lock_guard lock(mu_);
  return seen_.size();
}

std::vector<metadata::Event> Events::seen() {
  std::lock_guard lock(mu_);
  return seen_;
}

namespace {

void walk(metadata::StoreState& state, const std::string& key, std::map<std::string, KeyDump>& out) {
  auto children = state.read_children(key);
  EXPECT_TRUE(children.is_ok()) << key << ": " << children.status().to_string();
  if (!children.is_ok()) return;
  for (const std::string& child : *children) {
    std::string path = (key == "/" ? "/" : key + "/") + child;
    auto record = state.read_record(path);
    if (record.is_ok()) out[path] = KeyDump{record->value, record->stat.version, record->stat.session};
    walk(state, path, out);
  }
}

}  // namespace

std::map<std::string, KeyDump> dump(metadata::StoreState& state) {
  std::map<std::string, KeyDump> out;
  walk(state, "/", out);
  return out;
}

}  // namespace magnetar::cluster::testing
