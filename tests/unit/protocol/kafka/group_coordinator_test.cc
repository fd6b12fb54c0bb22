// The group state machine on a real runtime: joins, the leader's
// assignment relayed in SyncGroup, rebalances on join and leave, errors for
// unknown members and old generations, and the exact-offset memo.
#include "protocol/kafka/server/group_coordinator.h"

#include <gtest/gtest.h>

#include <future>
#include <vector>

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
    groups_ = std::make_unique<GroupCoordinator>(*runtime_, options_);
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

  GroupCoordinatorOptions options_;  // set before SetUp()
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
  groups_->remember_offset("g", "t", 0, 8, 6);
  EXPECT_EQ(groups_->exact_offset("g", "t", 0, 6), 8);
  EXPECT_EQ(groups_->exact_offset("g", "t", 0, 10), 10);  // the cursor moved since
  EXPECT_EQ(groups_->exact_offset("g", "t", 1, 3), 3);
  EXPECT_EQ(groups_->exact_offset("other", "t", 0, 6), 6);
  groups_->forget_offsets("g");
  EXPECT_EQ(groups_->exact_offset("g", "t", 0, 6), 6);
}

class BoundedGroupTest : public GroupCoordinatorTest {
 protected:
  void SetUp() override {
    options_.max_members = 3;
    GroupCoordinatorTest::SetUp();
  }
};

TEST_F(BoundedGroupTest, ANewMemberPastTheBoundIsRefusedAndMembersAlreadyInStay) {
  // The first member joins alone; two more start a rebalance the first
  // joins again: three members in one generation.
  auto first = join("");
  std::vector<JoinResult> in{wait(first)};
  ASSERT_EQ(in[0].error, kNone);
  auto second = join("");
  auto third = join("");
  auto again = join(in[0].member_id);
  in.push_back(wait(second));
  in.push_back(wait(third));
  in[0] = wait(again);
  for (const auto& r : in) ASSERT_EQ(r.error, kNone);
  EXPECT_EQ(in[0].generation, in[2].generation);

  auto fourth = join("");
  JoinResult refused = wait(fourth);
  EXPECT_EQ(refused.error, kGroupMaxSizeReached);
  // A member already in may join again.
  auto rejoin = join(in[1].member_id);
  auto rejoin0 = join(in[0].member_id);
  auto rejoin2 = join(in[2].member_id);
  EXPECT_EQ(wait(rejoin).error, kNone);
  EXPECT_EQ(wait(rejoin0).error, kNone);
  EXPECT_EQ(wait(rejoin2).error, kNone);
  // Once one leaves, a new member fits.
  EXPECT_EQ(leave(in[2].member_id), kNone);
  auto fifth = join("");
  auto r0 = join(in[0].member_id);
  auto r1 = join(in[1].member_id);
  EXPECT_EQ(wait(fifth).error, kNone);
  EXPECT_EQ(wait(r0).error, kNone);
  EXPECT_EQ(wait(r1).error, kNone);
}

}  // namespace
}  // namespace magnetar::protocol::kafka
