#include "metadata/leveldb_store.h"

#include <gtest/gtest.h>
#include <leveldb/env.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <ostream>

#include "common/metrics.h"
#include "metadata/blocking.h"
#include "metadata/write_op.h"
#include "runtime/reactor.h"

namespace magnetar::metadata {
namespace {

using common::ErrorCode;
using common::Result;
using common::Status;

constexpr auto kWait = std::chrono::seconds(10);

// LevelDB write batches so far, in this process (each one fdatasync).
uint64_t write_batches() {
  return common::MetricsRegistry::global().counter("magnetar_metadata_write_batches_total", "").value();
}

// A file system whose fsyncs fail while fail_syncs is set.
class SyncFailingEnv : public leveldb::EnvWrapper {
 public:
  SyncFailingEnv() : EnvWrapper(leveldb::Env::Default()) {}
  std::atomic<bool> fail_syncs{false};

  leveldb::Status NewWritableFile(const std::string& name, leveldb::WritableFile** result) override {
    leveldb::WritableFile* file = nullptr;
    leveldb::Status s = target()->NewWritableFile(name, &file);
    if (s.ok()) *result = new File(file, this);
    return s;
  }

 private:
  class File : public leveldb::WritableFile {
   public:
    File(leveldb::WritableFile* file, SyncFailingEnv* env) : file_(file), env_(env) {}
    leveldb::Status Append(const leveldb::Slice& data) override { return file_->Append(data); }
    leveldb::Status Close() override { return file_->Close(); }
    leveldb::Status Flush() override { return file_->Flush(); }
    leveldb::Status Sync() override {
      if (env_->fail_syncs.load()) return leveldb::Status::IOError("injected fsync failure");
      return file_->Sync();
    }

   private:
    std::unique_ptr<leveldb::WritableFile> file_;
    SyncFailingEnv* env_;
  };
};

// Holds the metadata thread: a call from a thread that is not a reactor is
// answered on the store's own thread, so a callback that waits there keeps
// every later call queued until release().
class Gate {
 public:
  explicit Gate(Store& store) {
    auto held = std::make_shared<std::promise<void>>();
    auto opened = opened_;
    store.get("/gate", [held, opened](Result<Record>) {
      held->set_value();
      opened.wait();
    });
    held->get_future().wait();
  }
  ~Gate() { release(); }
  void release() {
    if (!released_) release_.set_value();
    released_ = true;
  }

 private:
  std::promise<void> release_;
  std::shared_future<void> opened_ = release_.get_future().share();
  bool released_ = false;
};

// One call's answer, reduced to what the tests compare.
struct Answer {
  int call = 0;
  ErrorCode code = ErrorCode::kOk;
  int64_t number = 0;  // a version, or a session id
  std::string text;    // a value, or children joined by ','
  bool operator==(const Answer&) const = default;
};
void PrintTo(const Answer& a, std::ostream* os) {
  *os << "{call " << a.call << ", code " << static_cast<int>(a.code) << ", " << a.number << ", '" << a.text << "'}";
}

// Records answers in the order they arrive.
class Answers {
 public:
  Callback<Result<Stat>> put(int call) {
    return [this, call](Result<Stat> r) { add({call, code(r), r ? r->version : 0, ""}); };
  }
  StatusCallback status(int call) {
    return [this, call](Status s) { add({call, s.code(), 0, ""}); };
  }
  Callback<Result<Record>> get(int call) {
    return [this, call](Result<Record> r) { add({call, code(r), r ? r->stat.version : 0, r ? r->value : ""}); };
  }
  Callback<Result<SessionId>> session(int call) {
    return [this, call](Result<SessionId> r) { add({call, code(r), r ? static_cast<int64_t>(*r) : 0, ""}); };
  }
  Callback<Result<std::vector<std::string>>> list(int call) {
    return [this, call](Result<std::vector<std::string>> r) {
      std::string joined;
      if (r) {
        for (const auto& c : *r) joined += (joined.empty() ? "" : ",") + c;
      }
      add({call, code(r), 0, joined});
    };
  }
  bool wait_for(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return seen_.size() >= n; });
  }
  std::vector<Answer> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  template <typename T>
  static ErrorCode code(const Result<T>& r) {
    return r ? ErrorCode::kOk : r.status().code();
  }
  void add(Answer a) {
    std::lock_guard lock(mu_);
    seen_.push_back(std::move(a));
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Answer> seen_;
};

class LevelDbStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("magnetar-metadata-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    open();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void open() { open_with(LevelDbStore::Options{dir_.string()}); }
  void open_with(LevelDbStore::Options options) {
    store_.reset();
    options.path = dir_.string();
    store_ = std::make_unique<LevelDbStore>(std::move(options));
    ASSERT_TRUE(store_->start().is_ok());
  }
  void reopen() {
    store_->stop();
    store_.reset();
    open();
  }

  // Collects watch events; wait_for() bounds every wait.
  struct Events {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<Event> seen;
    void add(const Event& e) {
      std::lock_guard lock(mu);
      seen.push_back(e);
      cv.notify_all();
    }
    bool wait_for(size_t n) {
      std::unique_lock lock(mu);
      return cv.wait_for(lock, kWait, [&] { return seen.size() >= n; });
    }
  };

  std::filesystem::path dir_;
  SyncFailingEnv env_;  // outlives store_
  std::unique_ptr<LevelDbStore> store_;
};

TEST_F(LevelDbStoreTest, PutGetAndVersions) {
  auto created = blocking::put(*store_, "/a/b", "one", {kMustNotExist});
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  EXPECT_EQ(created->version, 1);
  EXPECT_GT(created->created_ms, 0);

  auto r = blocking::get(*store_, "/a/b");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->value, "one");
  EXPECT_EQ(r->stat.version, 1);
  EXPECT_FALSE(r->stat.ephemeral());

  auto again = blocking::put(*store_, "/a/b", "two", {kMustNotExist});
  ASSERT_FALSE(again.is_ok());
  EXPECT_EQ(again.status().code(), ErrorCode::kAlreadyExists);

  auto updated = blocking::put(*store_, "/a/b", "two", {1});
  ASSERT_TRUE(updated.is_ok());
  EXPECT_EQ(updated->version, 2);
  EXPECT_EQ(updated->created_ms, created->created_ms);

  // A stale version is refused and changes nothing.
  auto stale = blocking::put(*store_, "/a/b", "three", {1});
  ASSERT_FALSE(stale.is_ok());
  EXPECT_EQ(stale.status().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(blocking::get(*store_, "/a/b")->value, "two");

  auto any = blocking::put(*store_, "/a/b", "four");
  ASSERT_TRUE(any.is_ok());
  EXPECT_EQ(any->version, 3);

  auto missing_cas = blocking::put(*store_, "/a/none", "x", {4});
  EXPECT_EQ(missing_cas.status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(blocking::get(*store_, "/a/none").status().code(), ErrorCode::kNotFound);
}

TEST_F(LevelDbStoreTest, DeleteWithExpectedVersion) {
  ASSERT_TRUE(blocking::put(*store_, "/k", "v").is_ok());
  ASSERT_TRUE(blocking::put(*store_, "/k", "v2").is_ok());
  EXPECT_EQ(blocking::del(*store_, "/k", 1).code(), ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(blocking::get(*store_, "/k").is_ok());
  EXPECT_TRUE(blocking::del(*store_, "/k", 2).is_ok());
  EXPECT_EQ(blocking::get(*store_, "/k").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(blocking::del(*store_, "/k").code(), ErrorCode::kNotFound);
  // Re-created keys start again at version 1.
  EXPECT_EQ(blocking::put(*store_, "/k", "v3")->version, 1);
}

TEST_F(LevelDbStoreTest, RejectsMalformedKeys) {
  for (const char* bad : {"", "noslash", "/trailing/", "/double//slash", "/"}) {
    auto r = blocking::put(*store_, bad, "v");
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(blocking::get(*store_, "x").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(blocking::list_children(*store_, "/a/").status().code(), ErrorCode::kInvalidArgument);
}

TEST_F(LevelDbStoreTest, ListChildren) {
  for (const char* k : {"/t/a", "/t/b", "/t/b-x", "/t/b/c", "/t/b/c/d", "/t/c/deep/er", "/u/z", "/tt/q"}) {
    ASSERT_TRUE(blocking::put(*store_, k, "v").is_ok()) << k;
  }
  auto t = blocking::list_children(*store_, "/t");
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(*t, (std::vector<std::string>{"a", "b", "b-x", "c"}));
  EXPECT_EQ(*blocking::list_children(*store_, "/t/b"), (std::vector<std::string>{"c"}));
  EXPECT_EQ(*blocking::list_children(*store_, "/"), (std::vector<std::string>{"t", "tt", "u"}));
  auto none = blocking::list_children(*store_, "/nothing/here");
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->empty());
}

TEST_F(LevelDbStoreTest, SurvivesRestart) {
  ASSERT_TRUE(blocking::put(*store_, "/persist/me", "kept").is_ok());
  ASSERT_TRUE(blocking::put(*store_, "/persist/me", "kept2").is_ok());
  reopen();
  auto r = blocking::get(*store_, "/persist/me");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->value, "kept2");
  EXPECT_EQ(r->stat.version, 2);
}

TEST_F(LevelDbStoreTest, EphemeralKeysBelongToTheirSession) {
  auto s1 = blocking::open_session(*store_);
  auto s2 = blocking::open_session(*store_);
  ASSERT_TRUE(s1.is_ok() && s2.is_ok());
  EXPECT_NE(*s1, *s2);

  ASSERT_TRUE(blocking::put(*store_, "/owners/b1", "s1", {kMustNotExist, *s1}).is_ok());
  ASSERT_TRUE(blocking::put(*store_, "/owners/b2", "s2", {kMustNotExist, *s2}).is_ok());
  ASSERT_TRUE(blocking::put(*store_, "/owners/persistent", "p").is_ok());
  EXPECT_EQ(blocking::get(*store_, "/owners/b1")->stat.session, *s1);

  // A closed or unknown session may not own keys.
  auto bogus = blocking::put(*store_, "/owners/x", "v", {kAnyVersion, 9999});
  EXPECT_EQ(bogus.status().code(), ErrorCode::kFailedPrecondition);

  ASSERT_TRUE(blocking::close_session(*store_, *s1).is_ok());
  EXPECT_EQ(blocking::get(*store_, "/owners/b1").status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(blocking::get(*store_, "/owners/b2").is_ok());
  EXPECT_EQ(blocking::close_session(*store_, *s1).code(), ErrorCode::kNotFound);
  EXPECT_EQ(blocking::put(*store_, "/owners/late", "v", {kAnyVersion, *s1}).status().code(),
            ErrorCode::kFailedPrecondition);

  // A restart ends every session: its ephemeral keys go, persistent ones stay,
  // and session ids are not reused.
  reopen();
  EXPECT_EQ(blocking::get(*store_, "/owners/b2").status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(blocking::get(*store_, "/owners/persistent").is_ok());
  auto s3 = blocking::open_session(*store_);
  ASSERT_TRUE(s3.is_ok());
  EXPECT_GT(*s3, *s2);
}

TEST_F(LevelDbStoreTest, WatchesSeePrefixChangesInOrder) {
  Events events;
  auto id = store_->watch("/w/", [&](const Event& e) { events.add(e); });
  ASSERT_TRUE(id.is_ok());
  ASSERT_TRUE(blocking::put(*store_, "/w/a", "1").is_ok());
  ASSERT_TRUE(blocking::put(*store_, "/other", "1").is_ok());
  ASSERT_TRUE(blocking::put(*store_, "/w/a", "2").is_ok());
  ASSERT_TRUE(blocking::del(*store_, "/w/a").is_ok());
  ASSERT_TRUE(events.wait_for(3));
  {
    std::lock_guard lock(events.mu);
    ASSERT_EQ(events.seen.size(), 3u);
    EXPECT_EQ(events.seen[0].type, EventType::kCreated);
    EXPECT_EQ(events.seen[0].version, 1);
    EXPECT_EQ(events.seen[1].type, EventType::kModified);
    EXPECT_EQ(events.seen[1].version, 2);
    EXPECT_EQ(events.seen[2].type, EventType::kDeleted);
    EXPECT_EQ(events.seen[2].key, "/w/a");
  }
  // A refused write notifies nothing; after unwatch nothing more arrives.
  EXPECT_FALSE(blocking::put(*store_, "/w/b", "x", {5}).is_ok());
  store_->unwatch(*id);
  ASSERT_TRUE(blocking::put(*store_, "/w/c", "1").is_ok());
  std::lock_guard lock(events.mu);
  EXPECT_EQ(events.seen.size(), 3u);
}

TEST_F(LevelDbStoreTest, ClosingASessionNotifiesDeletes) {
  Events events;
  ASSERT_TRUE(store_->watch("/eph/", [&](const Event& e) { events.add(e); }).is_ok());
  auto s = blocking::open_session(*store_);
  ASSERT_TRUE(s.is_ok());
  ASSERT_TRUE(blocking::put(*store_, "/eph/x", "v", {kMustNotExist, *s}).is_ok());
  ASSERT_TRUE(blocking::close_session(*store_, *s).is_ok());
  ASSERT_TRUE(events.wait_for(2));
  std::lock_guard lock(events.mu);
  EXPECT_EQ(events.seen[1].type, EventType::kDeleted);
  EXPECT_EQ(events.seen[1].key, "/eph/x");
}

TEST_F(LevelDbStoreTest, CallbacksRunOnTheCallingReactor) {
  runtime::Reactor reactor(0, "reactor-test");
  reactor.start();
  std::mutex mu;
  std::condition_variable cv;
  bool on_reactor = false;
  bool done = false;
  ASSERT_TRUE(reactor.post([&]() {
    store_->put("/r/k", "v", {}, [&](common::Result<Stat> r) {
      std::lock_guard lock(mu);
      on_reactor = reactor.is_on_thread() && r.is_ok();
      done = true;
      cv.notify_all();
    });
  }).is_ok());
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, kWait, [&] { return done; }));
  }
  EXPECT_TRUE(on_reactor);
  reactor.stop();
}

TEST_F(LevelDbStoreTest, CallsAfterStopAreUnavailable) {
  store_->stop();
  EXPECT_EQ(blocking::get(*store_, "/a").status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(blocking::put(*store_, "/a", "v").status().code(), ErrorCode::kUnavailable);
}

TEST_F(LevelDbStoreTest, WritesQueuedTogetherShareOneSyncedBatch) {
  constexpr int kPuts = 200;
  Answers answers;
  uint64_t before = 0;
  {
    Gate gate(*store_);
    before = write_batches();
    for (int i = 0; i < kPuts; ++i) {
      store_->put("/group/k" + std::to_string(i), "v", {kMustNotExist}, answers.put(i));
    }
  }
  ASSERT_TRUE(answers.wait_for(kPuts));
  EXPECT_EQ(write_batches() - before, 1u);
  auto seen = answers.seen();
  for (int i = 0; i < kPuts; ++i) EXPECT_EQ(seen[i], (Answer{i, ErrorCode::kOk, 1, ""}));
  reopen();
  EXPECT_EQ(blocking::list_children(*store_, "/group")->size(), static_cast<size_t>(kPuts));
}

// Within one group every call sees the writes queued before it, and every
// answer is the one a write applied alone, in queue order, would get.
TEST_F(LevelDbStoreTest, GroupedCallsAnswerAsIfRunOneByOne) {
  Events events;
  ASSERT_TRUE(store_->watch("/s/", [&](const Event& e) { events.add(e); }).is_ok());
  auto earlier = blocking::open_session(*store_);
  ASSERT_TRUE(earlier.is_ok());
  const SessionId s = *earlier + 1;  // the session the group opens
  Answers answers;
  uint64_t before = 0;
  {
    Gate gate(*store_);
    before = write_batches();
    store_->put("/s/a", "one", {kMustNotExist}, answers.put(0));
    store_->put("/s/a", "again", {kMustNotExist}, answers.put(1));
    store_->put("/s/a", "two", {1}, answers.put(2));
    store_->put("/s/a", "stale", {1}, answers.put(3));
    store_->get("/s/a", answers.get(4));
    store_->del("/s/a", 2, answers.status(5));
    store_->get("/s/a", answers.get(6));
    store_->put("/s/a", "gone", {2}, answers.put(7));
    store_->open_session(answers.session(8));
    store_->put("/s/e", "eph", {kMustNotExist, s}, answers.put(9));
    store_->list_children("/s", answers.list(10));
    store_->close_session(s, answers.status(11));
    store_->get("/s/e", answers.get(12));
    store_->put("/s/late", "v", {kAnyVersion, s}, answers.put(13));
    store_->list_children("/s", answers.list(14));
    store_->put("/s/b", "kept", {}, answers.put(15));
    store_->close_session(s, answers.status(16));
  }
  ASSERT_TRUE(answers.wait_for(17));
  EXPECT_EQ(answers.seen(), (std::vector<Answer>{
                                {0, ErrorCode::kOk, 1, ""},
                                {1, ErrorCode::kAlreadyExists, 0, ""},
                                {2, ErrorCode::kOk, 2, ""},
                                {3, ErrorCode::kFailedPrecondition, 0, ""},
                                {4, ErrorCode::kOk, 2, "two"},
                                {5, ErrorCode::kOk, 0, ""},
                                {6, ErrorCode::kNotFound, 0, ""},
                                {7, ErrorCode::kNotFound, 0, ""},
                                {8, ErrorCode::kOk, static_cast<int64_t>(s), ""},
                                {9, ErrorCode::kOk, 1, ""},
                                {10, ErrorCode::kOk, 0, "e"},
                                {11, ErrorCode::kOk, 0, ""},
                                {12, ErrorCode::kNotFound, 0, ""},
                                {13, ErrorCode::kFailedPrecondition, 0, ""},
                                {14, ErrorCode::kOk, 0, ""},
                                {15, ErrorCode::kOk, 1, ""},
                                {16, ErrorCode::kNotFound, 0, ""},
                            }));
  EXPECT_EQ(write_batches() - before, 1u);
  ASSERT_TRUE(events.wait_for(6));
  {
    std::lock_guard lock(events.mu);
    std::vector<std::tuple<EventType, std::string, int64_t>> got;
    for (const auto& e : events.seen) got.emplace_back(e.type, e.key, e.version);
    EXPECT_EQ(got, (std::vector<std::tuple<EventType, std::string, int64_t>>{
                       {EventType::kCreated, "/s/a", 1},
                       {EventType::kModified, "/s/a", 2},
                       {EventType::kDeleted, "/s/a", 0},
                       {EventType::kCreated, "/s/e", 1},
                       {EventType::kDeleted, "/s/e", 0},
                       {EventType::kCreated, "/s/b", 1},
                   }));
  }

  // What the group left is what is on disk, session ids included.
  reopen();
  EXPECT_EQ(blocking::get(*store_, "/s/b")->value, "kept");
  EXPECT_EQ(blocking::get(*store_, "/s/a").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(blocking::get(*store_, "/s/e").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(*blocking::list_children(*store_, "/s"), (std::vector<std::string>{"b"}));
  EXPECT_GT(*blocking::open_session(*store_), s);
}

// Ownership of ephemeral keys follows the earlier writes of the group: a key
// made persistent survives its old session, one handed to a session goes
// with it.
TEST_F(LevelDbStoreTest, GroupedSessionCloseSeesOwnershipChanges) {
  auto s1 = blocking::open_session(*store_);
  auto s2 = blocking::open_session(*store_);
  ASSERT_TRUE(s1.is_ok() && s2.is_ok());
  ASSERT_TRUE(blocking::put(*store_, "/o/kept", "v", {kMustNotExist, *s1}).is_ok());
  ASSERT_TRUE(blocking::put(*store_, "/o/gone", "v", {kMustNotExist, *s1}).is_ok());
  ASSERT_TRUE(blocking::put(*store_, "/o/moved", "v", {kMustNotExist, *s1}).is_ok());
  Answers answers;
  {
    Gate gate(*store_);
    store_->put("/o/kept", "persistent now", {}, answers.put(0));
    store_->put("/o/moved", "s2 now", {kAnyVersion, *s2}, answers.put(1));
    store_->put("/o/new", "v", {kMustNotExist, *s1}, answers.put(2));
    store_->close_session(*s1, answers.status(3));
    store_->list_children("/o", answers.list(4));
  }
  ASSERT_TRUE(answers.wait_for(5));
  EXPECT_EQ(answers.seen()[4], (Answer{4, ErrorCode::kOk, 0, "kept,moved"}));
  EXPECT_EQ(blocking::get(*store_, "/o/kept")->stat.session, 0u);
  EXPECT_EQ(blocking::get(*store_, "/o/moved")->stat.session, *s2);
  ASSERT_TRUE(blocking::close_session(*store_, *s2).is_ok());
  EXPECT_EQ(*blocking::list_children(*store_, "/o"), (std::vector<std::string>{"kept"}));
}

TEST_F(LevelDbStoreTest, AFailedBatchFailsEveryWriteOfItsGroup) {
  LevelDbStore::Options options;
  options.env = &env_;
  open_with(options);
  auto session = blocking::open_session(*store_);
  ASSERT_TRUE(session.is_ok());
  ASSERT_TRUE(blocking::put(*store_, "/f/keep", "one").is_ok());
  Events events;
  ASSERT_TRUE(store_->watch("/f/", [&](const Event& e) { events.add(e); }).is_ok());
  Answers answers;
  uint64_t before = 0;
  {
    Gate gate(*store_);
    before = write_batches();
    env_.fail_syncs.store(true);
    store_->put("/f/new", "v", {kMustNotExist}, answers.put(0));
    store_->put("/f/keep", "two", {1}, answers.put(1));
    store_->get("/f/keep", answers.get(2));  // saw "two", which never happened
    store_->del("/f/keep", kAnyVersion, answers.status(3));
    store_->close_session(*session, answers.status(4));
    store_->open_session(answers.session(5));
    store_->put("/f/keep", "stale", {7}, answers.put(6));
  }
  ASSERT_TRUE(answers.wait_for(7));
  env_.fail_syncs.store(false);
  EXPECT_EQ(write_batches() - before, 1u);
  EXPECT_EQ(answers.seen(), (std::vector<Answer>{
                                {0, ErrorCode::kIoError, 0, ""},
                                {1, ErrorCode::kIoError, 0, ""},
                                {2, ErrorCode::kOk, 1, "one"},
                                {3, ErrorCode::kIoError, 0, ""},
                                {4, ErrorCode::kIoError, 0, ""},
                                {5, ErrorCode::kIoError, 0, ""},
                                {6, ErrorCode::kIoError, 0, ""},
                            }));
  EXPECT_EQ(blocking::get(*store_, "/f/new").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(blocking::get(*store_, "/f/keep")->value, "one");
  std::lock_guard lock(events.mu);
  EXPECT_TRUE(events.seen.empty());
}

TEST_F(LevelDbStoreTest, GroupsAreBoundedInCallsAndBytes) {
  Answers answers;
  uint64_t before = 0;
  {
    Gate gate(*store_);
    before = write_batches();
    for (int i = 0; i < 1500; ++i) store_->put("/b/k" + std::to_string(i), "v", {}, answers.put(i));
  }
  ASSERT_TRUE(answers.wait_for(1500));
  EXPECT_EQ(write_batches() - before, 2u);  // 1024 + 476

  LevelDbStore::Options options;
  options.max_group_bytes = 1;  // every call is a group of its own
  open_with(options);
  Answers alone;
  {
    Gate gate(*store_);
    before = write_batches();
    for (int i = 0; i < 10; ++i) store_->put("/b/k" + std::to_string(i), "v", {}, alone.put(i));
  }
  ASSERT_TRUE(alone.wait_for(10));
  EXPECT_EQ(write_batches() - before, 10u);
}

TEST_F(LevelDbStoreTest, AFullQueueRefusesCallsAtOnce) {
  LevelDbStore::Options options;
  options.queue_capacity = 8;
  open_with(options);
  Answers answers;
  {
    Gate gate(*store_);
    for (int i = 0; i < 12; ++i) store_->put("/q/k" + std::to_string(i), "v", {}, answers.put(i));
    ASSERT_TRUE(answers.wait_for(4));  // answered in this thread, before the gate opens
    for (const Answer& a : answers.seen()) EXPECT_EQ(a.code, ErrorCode::kResourceExhausted);
  }
  ASSERT_TRUE(answers.wait_for(12));
  auto seen = answers.seen();
  for (size_t i = 4; i < seen.size(); ++i) EXPECT_EQ(seen[i], (Answer{static_cast<int>(i - 4), ErrorCode::kOk, 1, ""}));
}

TEST(WriteOpTest, RoundTripsAndRejectsGarbage) {
  WriteOp op{WriteOp::Kind::kPut, "/a/b", std::string("\0bin", 4), 7, 3, 12345};
  auto back = decode_write_op(encode_write_op(op));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back->key, "/a/b");
  EXPECT_EQ(back->value, std::string("\0bin", 4));
  EXPECT_EQ(back->expected_version, 7);
  EXPECT_EQ(back->session, 3u);
  EXPECT_EQ(back->now_ms, 12345);
  EXPECT_EQ(decode_write_op("not a flatbuffer").status().code(), ErrorCode::kCorruption);
}

}  // namespace
}  // namespace magnetar::metadata
