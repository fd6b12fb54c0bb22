// Store conformance: the behaviour metadata::Store promises (store.h), run
// against every backend: LevelDbStore, and RaftStore on the leader of a
// 3-member fixture cluster. A backend passes only if callers cannot tell
// which one they talk to.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "unit/cluster/store_harness.h"

namespace magnetar::cluster::testing {
namespace {

using common::ErrorCode;
using metadata::EventType;
using metadata::kAnyVersion;
using metadata::kMustNotExist;
using metadata::Store;

enum class Backend { kLevelDb, kRaft };

class StoreConformanceTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kLevelDb) {
      harness_ = std::make_unique<LevelDbHarness>();
    } else {
      harness_ = std::make_unique<RaftStoreCluster>(3);
    }
  }
  void TearDown() override { harness_.reset(); }

  StoreHarness& h() { return *harness_; }
  Store& s() { return harness_->store(); }

  std::unique_ptr<StoreHarness> harness_;
};

INSTANTIATE_TEST_SUITE_P(Backends, StoreConformanceTest, ::testing::Values(Backend::kLevelDb, Backend::kRaft),
                         [](const auto& info) { return info.param == Backend::kLevelDb ? "LevelDb" : "Raft"; });

TEST_P(StoreConformanceTest, PutGetAndCompareAndSet) {
  auto created = put(h(), s(), "/t/a", "one", {kMustNotExist});
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  EXPECT_EQ(created->version, 1);
  EXPECT_FALSE(created->ephemeral());

  EXPECT_EQ(put(h(), s(), "/t/a", "dup", {kMustNotExist}).status().code(), ErrorCode::kAlreadyExists);
  auto second = put(h(), s(), "/t/a", "two", {1});
  ASSERT_TRUE(second.is_ok()) << second.status().to_string();
  EXPECT_EQ(second->version, 2);
  EXPECT_EQ(second->created_ms, created->created_ms);
  EXPECT_GE(second->modified_ms, created->modified_ms);
  EXPECT_EQ(put(h(), s(), "/t/a", "stale", {1}).status().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(put(h(), s(), "/t/missing", "x", {3}).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(put(h(), s(), "/t/a", "bad", {-7}).status().code(), ErrorCode::kInvalidArgument);

  // Failed writes changed nothing.
  auto r = get(h(), s(), "/t/a");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->key, "/t/a");
  EXPECT_EQ(r->value, "two");
  EXPECT_EQ(r->stat.version, 2);
  EXPECT_EQ(get(h(), s(), "/t/missing").status().code(), ErrorCode::kNotFound);

  auto third = put(h(), s(), "/t/a", "three");  // unconditional
  ASSERT_TRUE(third.is_ok());
  EXPECT_EQ(third->version, 3);
}

TEST_P(StoreConformanceTest, DeleteWithExpectedVersion) {
  ASSERT_TRUE(put(h(), s(), "/d/k", "v").is_ok());
  ASSERT_TRUE(put(h(), s(), "/d/k", "v2").is_ok());
  EXPECT_EQ(del(h(), s(), "/d/k", 1).code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(del(h(), s(), "/d/k", kMustNotExist).code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(get(h(), s(), "/d/k")->stat.version, 2);
  EXPECT_TRUE(del(h(), s(), "/d/k", 2).is_ok());
  EXPECT_EQ(get(h(), s(), "/d/k").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(del(h(), s(), "/d/k").code(), ErrorCode::kNotFound);
  // A recreated key starts again at version 1.
  auto again = put(h(), s(), "/d/k", "new", {kMustNotExist});
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->version, 1);
}

TEST_P(StoreConformanceTest, RejectsMalformedKeys) {
  EXPECT_EQ(put(h(), s(), "relative", "v").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(put(h(), s(), "/trailing/", "v").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(put(h(), s(), "/", "v").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(get(h(), s(), "/a//b").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(del(h(), s(), "").code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(list(h(), s(), "no-slash").status().code(), ErrorCode::kInvalidArgument);
}

TEST_P(StoreConformanceTest, ListChildren) {
  for (const char* key : {"/l/b", "/l/b/c", "/l/b-x", "/l/d/e/f", "/l2"}) ASSERT_TRUE(put(h(), s(), key, "v").is_ok());
  EXPECT_EQ(*list(h(), s(), "/l"), (std::vector<std::string>{"b", "b-x", "d"}));
  EXPECT_EQ(*list(h(), s(), "/"), (std::vector<std::string>{"l", "l2"}));
  EXPECT_TRUE(list(h(), s(), "/nothing")->empty());
  // A child exists while any key under it does, and goes with the last one.
  ASSERT_TRUE(del(h(), s(), "/l/b").is_ok());
  EXPECT_EQ(*list(h(), s(), "/l"), (std::vector<std::string>{"b", "b-x", "d"}));
  ASSERT_TRUE(del(h(), s(), "/l/b/c").is_ok());
  EXPECT_EQ(*list(h(), s(), "/l"), (std::vector<std::string>{"b-x", "d"}));
}

TEST_P(StoreConformanceTest, WatchesSeePrefixChangesInOrder) {
  Events events;
  auto id = s().watch("/w/", events.callback());
  ASSERT_TRUE(id.is_ok());
  EXPECT_EQ(s().watch("no-slash", events.callback()).status().code(), ErrorCode::kInvalidArgument);
  ASSERT_TRUE(put(h(), s(), "/w/a", "1").is_ok());
  ASSERT_TRUE(put(h(), s(), "/other", "1").is_ok());
  ASSERT_TRUE(put(h(), s(), "/w/a", "2").is_ok());
  ASSERT_TRUE(put(h(), s(), "/w/b", "1").is_ok());
  ASSERT_TRUE(del(h(), s(), "/w/a").is_ok());
  ASSERT_TRUE(h().run_until([&] { return events.size() >= 4; }));
  // A refused write notifies nothing; after unwatch nothing more arrives.
  EXPECT_FALSE(put(h(), s(), "/w/b", "x", {5}).is_ok());
  s().unwatch(*id);
  ASSERT_TRUE(put(h(), s(), "/w/c", "1").is_ok());

  auto seen = events.seen();
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].type, EventType::kCreated);
  EXPECT_EQ(seen[0].key, "/w/a");
  EXPECT_EQ(seen[0].version, 1);
  EXPECT_EQ(seen[1].type, EventType::kModified);
  EXPECT_EQ(seen[1].version, 2);
  EXPECT_EQ(seen[2].type, EventType::kCreated);
  EXPECT_EQ(seen[2].key, "/w/b");
  EXPECT_EQ(seen[3].type, EventType::kDeleted);
  EXPECT_EQ(seen[3].key, "/w/a");
  EXPECT_EQ(seen[3].version, 0);
}

TEST_P(StoreConformanceTest, EphemeralKeysBelongToTheirSession) {
  Events events;
  ASSERT_TRUE(s().watch("/owners/", events.callback()).is_ok());
  auto s1 = open_session(h(), s());
  auto s2 = open_session(h(), s());
  ASSERT_TRUE(s1.is_ok() && s2.is_ok());
  EXPECT_NE(*s1, *s2);

  ASSERT_TRUE(put(h(), s(), "/owners/b1", "s1", {kMustNotExist, *s1}).is_ok());
  ASSERT_TRUE(put(h(), s(), "/owners/b2", "s2", {kMustNotExist, *s2}).is_ok());
  ASSERT_TRUE(put(h(), s(), "/owners/persistent", "p").is_ok());
  auto b1 = get(h(), s(), "/owners/b1");
  ASSERT_TRUE(b1.is_ok());
  EXPECT_EQ(b1->stat.session, *s1);
  EXPECT_TRUE(b1->stat.ephemeral());

  // An unknown session may not own keys.
  EXPECT_EQ(put(h(), s(), "/owners/x", "v", {kAnyVersion, 9999}).status().code(), ErrorCode::kFailedPrecondition);

  // Closing a session deletes its keys, one event each, and only its keys.
  ASSERT_TRUE(close_session(h(), s(), *s1).is_ok());
  EXPECT_EQ(get(h(), s(), "/owners/b1").status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(get(h(), s(), "/owners/b2").is_ok());
  EXPECT_TRUE(get(h(), s(), "/owners/persistent").is_ok());
  EXPECT_EQ(close_session(h(), s(), *s1).code(), ErrorCode::kNotFound);
  EXPECT_EQ(put(h(), s(), "/owners/late", "v", {kAnyVersion, *s1}).status().code(), ErrorCode::kFailedPrecondition);
  ASSERT_TRUE(h().run_until([&] { return events.size() >= 4; }));
  auto seen = events.seen();
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[3].type, EventType::kDeleted);
  EXPECT_EQ(seen[3].key, "/owners/b1");

  // Ids are never reused.
  auto s3 = open_session(h(), s());
  ASSERT_TRUE(s3.is_ok());
  EXPECT_GT(*s3, *s2);
}

}  // namespace
}  // namespace magnetar::cluster::testing
