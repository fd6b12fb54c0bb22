// Producer access modes: the admission rules alone, then on a topic.
#include "broker/producer.h"

#include "utils/broker_fixture.h"

namespace magnetar::broker {
namespace {

using Decision = ProducerAccess::Decision;

TEST(ProducerAccessTest, SharedProducersCoexistUntilAnExclusiveOneHoldsTheTopic) {
  ProducerAccess a;
  EXPECT_EQ(a.decide(ProducerAccessMode::kShared), Decision::kAdmit);
  a.admitted(1, ProducerAccessMode::kShared);
  EXPECT_EQ(a.decide(ProducerAccessMode::kShared), Decision::kAdmit);
  EXPECT_EQ(a.decide(ProducerAccessMode::kExclusive), Decision::kRefuseFenced);
  EXPECT_EQ(a.decide(ProducerAccessMode::kWaitForExclusive), Decision::kWait);
  EXPECT_EQ(a.decide(ProducerAccessMode::kExclusiveWithFencing), Decision::kAdmitAndFence);
  a.removed(1);
  EXPECT_EQ(a.decide(ProducerAccessMode::kExclusive), Decision::kAdmit);
  a.admitted(2, ProducerAccessMode::kExclusive);
  EXPECT_EQ(a.epoch(), 1u);
  EXPECT_EQ(a.decide(ProducerAccessMode::kShared), Decision::kRefuseBusy);
  EXPECT_EQ(a.decide(ProducerAccessMode::kExclusive), Decision::kRefuseFenced);
}

TEST(ProducerAccessTest, WaitingProducersAreAdmittedInOrderOnceTheTopicIsFree) {
  ProducerAccess a;
  a.admitted(1, ProducerAccessMode::kExclusive);
  a.wait(2);
  a.wait(3);
  EXPECT_FALSE(a.next_waiting().has_value());  // 1 still holds it
  a.removed(1);
  EXPECT_EQ(a.next_waiting(), 2u);
  a.admitted(2, ProducerAccessMode::kWaitForExclusive);
  EXPECT_FALSE(a.next_waiting().has_value());
  a.removed(3);  // gave up waiting
  a.removed(2);
  EXPECT_FALSE(a.next_waiting().has_value());
}

class ProducerAccessTopicTest : public BrokerFixture {
 protected:
  struct Outcome {
    bool waited = false;
    std::optional<Result<ProducerAdmission>> answer;
    std::optional<Status> closed;
  };
  // Runs add_producer on the home reactor; the outcome fills in as it comes.
  std::shared_ptr<Outcome> add(uint64_t id, const std::string& name, ProducerAccessMode mode) {
    auto out = std::make_shared<Outcome>();
    auto mu = mu_;
    on_topic<bool>(kTopic, [=](Topic& t, auto done) {
      ProducerOptions o{id, name, mode};
      o.on_closed = [out, mu](const Status& why) {
        std::lock_guard lock(*mu);
        out->closed = why;
      };
      t.add_producer(
          o,
          [out, mu]() {
            std::lock_guard lock(*mu);
            out->waited = true;
          },
          [out, mu](Result<ProducerAdmission> r) {
            std::lock_guard lock(*mu);
            out->answer = std::move(r);
          });
      done(true);
    });
    return out;
  }
  void remove(uint64_t id) {
    on_topic<bool>(kTopic, [id](Topic& t, auto done) {
      t.remove_producer(id);
      done(true);
    });
  }
  common::ErrorCode code(const std::shared_ptr<Outcome>& o) {
    std::lock_guard lock(*mu_);
    if (!o->answer) return common::ErrorCode::kInternal;
    return o->answer->is_ok() ? common::ErrorCode::kOk : o->answer->status().code();
  }
  bool answered(const std::shared_ptr<Outcome>& o) {
    std::lock_guard lock(*mu_);
    return o->answer.has_value();
  }
  bool was_closed(const std::shared_ptr<Outcome>& o) {
    std::lock_guard lock(*mu_);
    return o->closed.has_value();
  }
  const std::string kTopic = "persistent://public/default/access";
  std::shared_ptr<std::mutex> mu_ = std::make_shared<std::mutex>();
};

TEST_F(ProducerAccessTopicTest, ExclusiveIsRefusedBesideOthersAndKeepsSharedOnesOut) {
  auto shared = add(1, "s", ProducerAccessMode::kShared);
  EXPECT_EQ(code(shared), common::ErrorCode::kOk);
  EXPECT_EQ(code(add(2, "e", ProducerAccessMode::kExclusive)), common::ErrorCode::kFenced);
  remove(1);
  EXPECT_EQ(code(add(3, "e", ProducerAccessMode::kExclusive)), common::ErrorCode::kOk);
  EXPECT_EQ(code(add(4, "s2", ProducerAccessMode::kShared)), common::ErrorCode::kAlreadyExists);
}

TEST_F(ProducerAccessTopicTest, WaitForExclusiveIsAnsweredWhenTheHolderLeaves) {
  auto first = add(1, "a", ProducerAccessMode::kExclusive);
  ASSERT_EQ(code(first), common::ErrorCode::kOk);
  auto second = add(2, "b", ProducerAccessMode::kWaitForExclusive);
  EXPECT_TRUE(second->waited);
  EXPECT_FALSE(answered(second));
  remove(1);
  EXPECT_EQ(code(second), common::ErrorCode::kOk);
  EXPECT_EQ(second->answer->value().topic_epoch, 2u);
  EXPECT_EQ(stats(kTopic).publishers.size(), 1u);
}

TEST_F(ProducerAccessTopicTest, ExclusiveWithFencingClosesTheOthers) {
  auto a = add(1, "a", ProducerAccessMode::kShared);
  auto b = add(2, "b", ProducerAccessMode::kShared);
  auto c = add(3, "c", ProducerAccessMode::kExclusiveWithFencing);
  EXPECT_EQ(code(c), common::ErrorCode::kOk);
  EXPECT_TRUE(was_closed(a));
  EXPECT_TRUE(was_closed(b));
  EXPECT_FALSE(was_closed(c));
  auto stats_now = stats(kTopic);
  ASSERT_EQ(stats_now.publishers.size(), 1u);
  EXPECT_EQ(stats_now.publishers[0].producer_name, "c");
  EXPECT_EQ(stats_now.publishers[0].access_mode, ProducerAccessMode::kExclusiveWithFencing);
}

}  // namespace
}  // namespace magnetar::broker
