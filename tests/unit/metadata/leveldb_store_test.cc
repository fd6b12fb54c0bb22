#include "metadata/leveldb_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "metadata/blocking.h"
#include "metadata/write_op.h"
#include "runtime/reactor.h"

namespace magnetar::metadata {
namespace {

using common::ErrorCode;

constexpr auto kWait = std::chrono::seconds(10);

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
  void open() {
    store_ = std::make_unique<LevelDbStore>(LevelDbStore::Options{dir_.string()});
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
