// The group state machine on a real runtime: joins, the leader's
// assignment relayed in SyncGroup, rebalances on join and leave, errors for
// unknown members and old generations, and the exact-offset memo.
#include "protocol/kafka/server/group_coordinator.h"

#include <gtest/gtest.h>

#include <future>

namespace magnetar::protocol::kafka {
namespace {

constexpr auto kWait = std::chrono::seconds(30);

template <typename T>
T wait(std::future<T>& f) {
  EXPECT_EQ(f.wait_for(kWait), std::future_status::ready);
  return f.get();
}

class GroupCoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime_ = std::make_unique<runtime::Runtime>(2);
    runtime_->start();
    groups_ = std::make_unique<GroupCoordinator>(*runtime_);
  }
  void TearDown() override {
    groups_->stop();
    runtime_->stop();
    groups_.reset();
  }

  std::future<JoinResult> join(const std::string& member, std::string metadata = "meta") {
    auto p = std::make_shared<std::promise<JoinResult>>();
    JoinArgs args;
    args.group = "g";
    args.member_id = member;
    args.client_id = "client";
    args.session_timeout_ms = 10000;
    args.protocol_type = "consumer";
    args.protocols = {{"range", std::move(metadata)}};
    groups_->join(std::move(args), [p](JoinResult r) { p->set_value(std::move(r)); });
    return p->get_future();
  }
  std::future<std::pair<ErrorCode, std::string>> sync(int32_t gen, const std::string& member,
                                                      std::vector<NamedBytes> assignments = {}) {
    auto p = std::make_shared<std::promise<std::pair<ErrorCode, std::string>>>();
    groups_->sync("g", gen, member, std::move(assignments),
                  [p](ErrorCode e, std::string a) { p->set_value({e, std::move(a)}); });
    return p->get_future();
  }
  ErrorCode heartbeat(int32_t gen, const std::string& member) {
    std::promise<ErrorCode> p;
    auto f = p.get_future();
    groups_->heartbeat("g", gen, member, [&p](ErrorCode e) { p.set_value(e); });
    return wait(f);
  }
  ErrorCode leave(const std::string& member) {
    std::promise<ErrorCode> p;
    auto f = p.get_future();
    groups_->leave("g", member, [&p](ErrorCode e) { p.set_value(e); });
    return wait(f);
  }

  std::unique_ptr<runtime::Runtime> runtime_;
  std::unique_ptr<GroupCoordinator> groups_;
};

TEST_F(GroupCoordinatorTest, TwoMembersRebalanceAndGetTheLeadersAssignment) {
  auto f1 = join("");
  JoinResult a = wait(f1);
  ASSERT_EQ(a.error, kNone);
  EXPECT_EQ(a.leader, a.member_id);
  ASSERT_EQ(a.members.size(), 1u);
  auto s1 = sync(a.generation, a.member_id, {{a.member_id, "all"}});
  EXPECT_EQ(wait(s1), std::make_pair(kNone, std::string("all")));
  EXPECT_EQ(heartbeat(a.generation, a.member_id), kNone);

  // A second member joins: the first learns of it from its heartbeat.
  auto f2 = join("", "meta-b");
  EXPECT_EQ(heartbeat(a.generation, a.member_id), kRebalanceInProgress);
  auto f1again = join(a.member_id);
  JoinResult b = wait(f2);
  JoinResult a2 = wait(f1again);
  ASSERT_EQ(b.error, kNone);
  ASSERT_EQ(a2.error, kNone);
  EXPECT_EQ(a2.generation, a.generation + 1);
  EXPECT_EQ(b.generation, a2.generation);
  EXPECT_EQ(a2.leader, a.member_id);  // the leader stays
  EXPECT_EQ(a2.members.size(), 2u);
  EXPECT_TRUE(b.members.empty());  // followers are not told the members

  // The follower's SyncGroup waits for the leader's.
  auto sb = sync(b.generation, b.member_id);
  EXPECT_EQ(sb.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  auto sa = sync(a2.generation, a.member_id, {{a.member_id, "p0"}, {b.member_id, "p1"}});
  EXPECT_EQ(wait(sa), std::make_pair(kNone, std::string("p0")));
  EXPECT_EQ(wait(sb), std::make_pair(kNone, std::string("p1")));

  // An old generation is refused; leaving starts another rebalance.
  EXPECT_EQ(heartbeat(a.generation, a.member_id), kIllegalGeneration);
  EXPECT_EQ(leave(b.member_id), kNone);
  EXPECT_EQ(heartbeat(a2.generation, a.member_id), kRebalanceInProgress);
  auto f1last = join(a.member_id);
  JoinResult alone = wait(f1last);
  EXPECT_EQ(alone.generation, a2.generation + 1);
  EXPECT_EQ(alone.members.size(), 1u);
}

TEST_F(GroupCoordinatorTest, UnknownMembersAndEmptyGroupIdsAreRefused) {
  EXPECT_EQ(heartbeat(1, "nobody"), kUnknownMemberId);
  EXPECT_EQ(leave("nobody"), kUnknownMemberId);
  auto s = sync(1, "nobody");
  EXPECT_EQ(wait(s).first, kUnknownMemberId);
  auto j = join("nobody");
  EXPECT_EQ(wait(j).error, kUnknownMemberId);
  std::promise<ErrorCode> p;
  auto f = p.get_future();
  groups_->heartbeat("", 1, "m", [&p](ErrorCode e) { p.set_value(e); });
  EXPECT_EQ(wait(f), kInvalidGroupId);
}

TEST_F(GroupCoordinatorTest, ExactOffsetIsReturnedWhileTheCursorAgrees) {
  groups_->remember_offset("g\nt\n0", 8, 6);
  EXPECT_EQ(groups_->exact_offset("g\nt\n0", 6), 8);
  EXPECT_EQ(groups_->exact_offset("g\nt\n0", 10), 10);  // the cursor moved since
  EXPECT_EQ(groups_->exact_offset("g\nt\n1", 3), 3);
}

}  // namespace
}  // namespace magnetar::protocol::kafka
