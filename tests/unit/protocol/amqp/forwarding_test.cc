// What one cluster member asks another for AMQP (forwarding.h), answered by
// a real broker: forwarded publishes stored in order in the named queues,
// the queue topic calls, and calls that do not decode refused with a clear
// error while the member goes on answering.
#include "protocol/amqp/server/forwarding.h"

#include <future>
#include <map>

#include "utils/broker_fixture.h"
#include "cluster/rpc_format.h"
#include "cluster/rpc_records.h"
#include "protocol/amqp/server/amqp_service.h"
#include "protocol/amqp/server/cluster_generated.h"

namespace magnetar::protocol::amqp {
namespace {

constexpr auto kPublish = static_cast<uint16_t>(cluster::rpc::Method::kAmqpPublish);
constexpr auto kTopic = static_cast<uint16_t>(cluster::rpc::Method::kAmqpQueueTopic);

// The handlers a member registers, called as another member would.
class CapturedCalls final : public broker::RemoteCalls {
 public:
  void call(uint64_t, uint16_t, std::string, Done done) override {
    ADD_FAILURE() << "a standalone broker called another member";
    done(common::Status::unavailable("no members"));
  }
  void handle(uint16_t method, Handler handler) override { handlers_[method] = std::move(handler); }
  std::string ask(uint16_t method, std::string payload) {
    auto answer = std::make_shared<std::promise<std::string>>();
    auto got = answer->get_future();
    handlers_.at(method)(payload, [answer](std::string reply) { answer->set_value(std::move(reply)); });
    EXPECT_EQ(got.wait_for(broker::kWait), std::future_status::ready);
    return got.get();
  }

 private:
  std::map<uint16_t, Handler> handlers_;
};

std::string publish_call(const std::string& queue, const std::string& body) {
  flatbuffers::FlatBufferBuilder b;
  auto queues = b.CreateVector(std::vector<flatbuffers::Offset<flatbuffers::String>>{b.CreateString(queue)});
  auto levels = b.CreateVector(std::vector<uint8_t>{0});
  const uint8_t no_properties[] = {0, 0};  // property flags: none
  b.Finish(fb::CreateForwardedPublish(b, 1, b.CreateString("public/default"), queues, levels, b.CreateString(""),
                                      b.CreateString(queue), b.CreateVector(no_properties, 2),
                                      b.CreateVector(reinterpret_cast<const uint8_t*>(body.data()), body.size()),
                                      1700000000000, b.CreateString("member-2"), 7, b.CreateString("10.0.0.2:5000")));
  return cluster::record_bytes(b);
}

std::string topic_call(const std::string& topic, uint8_t op, bool fresh = false) {
  flatbuffers::FlatBufferBuilder b;
  b.Finish(fb::CreateTopicCall(b, 1, b.CreateString(topic), op, fresh, false));
  return cluster::record_bytes(b);
}

class ForwardingTest : public broker::BrokerFixture {
 protected:
  void SetUp() override {
    BrokerFixture::SetUp();
    service_ = std::make_unique<AmqpService>(*runtime_, *broker_, *store_, AmqpServiceOptions{});
    serve_cluster_calls(*service_, calls_);
  }
  void TearDown() override {
    service_.reset();
    BrokerFixture::TearDown();
  }
  const fb::PublishOutcome* publish(const std::string& payload) {
    reply_ = calls_.ask(kPublish, payload);
    const auto* outcome = cluster::verified_record<fb::PublishOutcome>(reply_);
    EXPECT_NE(outcome, nullptr);
    return outcome;
  }
  const fb::TopicCallReply* topic(const std::string& payload) {
    reply_ = calls_.ask(kTopic, payload);
    const auto* answer = cluster::verified_record<fb::TopicCallReply>(reply_);
    EXPECT_NE(answer, nullptr);
    return answer;
  }

  CapturedCalls calls_;
  std::unique_ptr<AmqpService> service_;
  std::string reply_;
};

TEST_F(ForwardingTest, ForwardedPublishesAreStoredInOrderInTheirQueue) {
  const std::string name = "persistent://public/default/fwd";
  const auto* prepared = topic(topic_call(name, static_cast<uint8_t>(TopicCall::Op::kPrepare), true));
  ASSERT_EQ(prepared->code(), 0) << prepared->message()->str();
  for (int i = 0; i < 3; ++i) {
    const auto* outcome = publish(publish_call("fwd", "m" + std::to_string(i)));
    ASSERT_EQ(outcome->code(), 0) << outcome->message()->str();
    EXPECT_FALSE(outcome->rejected());
  }
  const auto* counts = topic(topic_call(name, static_cast<uint8_t>(TopicCall::Op::kCounts)));
  ASSERT_EQ(counts->code(), 0);
  EXPECT_EQ(counts->messages(), 3u);

  auto& sink = new_sink();
  ASSERT_TRUE(subscribe(name, 1, options("amqp", broker::SubscriptionType::kShared), &sink).is_ok());
  flow(name, "amqp", 1, 3);
  auto got = sink.wait_for(3);
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    std::vector<AmqpMessage> messages;
    ASSERT_TRUE(entry_to_messages(got[i].payload, &messages).is_ok());
    ASSERT_EQ(messages.size(), 1u);
    EXPECT_EQ(messages[0].body.to_string(), "m" + std::to_string(i));
    EXPECT_EQ(messages[0].routing_key, "fwd");
  }
}

TEST_F(ForwardingTest, QueueTopicCallsPurgeCountAndDelete) {
  const std::string name = "persistent://public/default/calls";
  ASSERT_EQ(topic(topic_call(name, static_cast<uint8_t>(TopicCall::Op::kPrepare), true))->code(), 0);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(publish(publish_call("calls", "x"))->code(), 0);
  const auto* purged = topic(topic_call(name, static_cast<uint8_t>(TopicCall::Op::kPurge)));
  ASSERT_EQ(purged->code(), 0);
  EXPECT_EQ(purged->messages(), 4u);
  EXPECT_EQ(topic(topic_call(name, static_cast<uint8_t>(TopicCall::Op::kCounts)))->messages(), 0u);
  ASSERT_EQ(publish(publish_call("calls", "y"))->code(), 0);
  const auto* deleted = topic(topic_call(name, static_cast<uint8_t>(TopicCall::Op::kDelete)));
  ASSERT_EQ(deleted->code(), 0);
  EXPECT_EQ(deleted->messages(), 1u);
}

TEST_F(ForwardingTest, CallsThatDoNotDecodeAreRefusedAndTheMemberGoesOn) {
  const std::string garbage[] = {"", "\x01", std::string(64, '\xff'), topic_call("persistent://public/default/q", 1)};
  for (const auto& payload : garbage) {
    const auto* outcome = publish(payload);
    ASSERT_NE(outcome, nullptr);
    EXPECT_EQ(outcome->code(), static_cast<uint8_t>(common::ErrorCode::kInvalidArgument));
    EXPECT_NE(outcome->message()->str().find("refused"), std::string::npos) << outcome->message()->str();
  }
  for (const auto& payload : {std::string("junk"), topic_call("not a topic", 2), topic_call("persistent://a/b/c", 9)}) {
    const auto* answer = topic(payload);
    ASSERT_NE(answer, nullptr);
    EXPECT_EQ(answer->code(), static_cast<uint8_t>(common::ErrorCode::kInvalidArgument));
  }
  // Nothing was stored, and a good call still works.
  ASSERT_EQ(topic(topic_call("persistent://public/default/q", static_cast<uint8_t>(TopicCall::Op::kPrepare), true))
                ->code(),
            0);
  ASSERT_EQ(publish(publish_call("q", "after"))->code(), 0);
  const auto* counts = topic(topic_call("persistent://public/default/q", static_cast<uint8_t>(TopicCall::Op::kCounts)));
  EXPECT_EQ(counts->messages(), 1u);
}

}  // namespace
}  // namespace magnetar::protocol::amqp
