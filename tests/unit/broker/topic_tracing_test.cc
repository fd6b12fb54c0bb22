// Message tracing on a real broker: the hooks on the publish, dispatch and
// ack paths write events to the namespace's trace topic, and find_traces
// reads them back as one timeline per message.
#include "utils/broker_fixture.h"
#include "utils/trace_queries.h"

namespace magnetar::broker {
namespace {

class TopicTracingTest : public BrokerFixture {
 protected:
  void trace_all(const std::string& topic, std::optional<TracingPolicy> tracing = TracingPolicy{TraceMode::kAll}) {
    on_topic<bool>(topic, [tracing](Topic& t, auto done) {
      NamespacePolicies p;
      p.tracing = tracing;
      t.apply_policies(p);
      done(true);
    });
  }
  Result<TraceAnswer> find(const std::string& topic, TraceQuery q) {
    auto p = std::make_shared<std::promise<Result<TraceAnswer>>>();
    auto f = p->get_future();
    broker_->find_traces(TopicName::parse(topic).value(), std::move(q),
                         [p](Result<TraceAnswer> a) { p->set_value(std::move(a)); });
    if (f.wait_for(kWait) != std::future_status::ready) return Status::timeout("find_traces did not answer");
    return f.get();
  }
  // Looks `position` up until its timeline has `stages` stages (events are
  // flushed in the background), at most kWait.
  MessageTrace wait_for_stages(const std::string& topic, Position position, size_t stages) {
    auto until = std::chrono::steady_clock::now() + kWait;
    MessageTrace last;
    while (std::chrono::steady_clock::now() < until) {
      auto a = find(topic, by_position(position));
      if (a.is_ok() && !a->messages.empty()) {
        last = a->messages[0];
        if (last.stages.size() >= stages) return last;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "timeline of " << position.to_string() << " has " << last.stages.size() << " stages, not "
                  << stages;
    return last;
  }
};

const std::string kTopic = "persistent://public/default/traced";

std::vector<std::string> names(const MessageTrace& m) {
  std::vector<std::string> out;
  for (const auto& e : m.stages) out.emplace_back(trace_stage_name(e.stage));
  return out;
}

TEST_F(TopicTracingTest, EveryStageOfATracedMessageIsRecordedInOrder) {
  trace_all(kTopic);
  ASSERT_TRUE(add_producer(kTopic, 1, "producer-a").is_ok());
  auto positions = publish(kTopic, 1, 2);
  ASSERT_EQ(positions.size(), 2u);
  RecordingSink& sink = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 7, options("sub", SubscriptionType::kShared), &sink).is_ok());
  flow(kTopic, "sub", 7, 10);
  ASSERT_EQ(sink.wait_for(2).size(), 2u);
  // The first is asked for again (a negative ack), then acknowledged.
  on_topic<bool>(kTopic, [&](Topic& t, auto done) {
    t.subscription("sub")->redeliver_unacknowledged(7, {positions[0]});
    done(true);
  });
  ASSERT_GE(sink.wait_for(3).size(), 3u);
  ASSERT_TRUE(ack(kTopic, "sub", 7, positions[0]).is_ok());

  MessageTrace m = wait_for_stages(kTopic, positions[0], 6);
  EXPECT_EQ(names(m), (std::vector<std::string>{"received", "persisted", "dispatched", "nacked", "dispatched",
                                                "acked"}));
  EXPECT_EQ(m.received.producer, "producer-a");
  EXPECT_EQ(m.stages[2].subscription, "sub");
  EXPECT_EQ(m.stages[2].consumer_id, 7u);
  EXPECT_EQ(m.stages[2].redelivery_count, 0u);
  EXPECT_EQ(m.stages[4].redelivery_count, 1u);
  for (size_t i = 1; i < m.stages.size(); ++i) EXPECT_LE(m.stages[i - 1].time_ms, m.stages[i].time_ms);

  // The second was delivered once and never acknowledged.
  MessageTrace second = wait_for_stages(kTopic, positions[1], 3);
  EXPECT_EQ(names(second), (std::vector<std::string>{"received", "persisted", "dispatched"}));
}

TEST_F(TopicTracingTest, NothingIsRecordedWhileTracingIsOffAndTracesSurviveARestart) {
  ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());
  auto untraced = publish(kTopic, 1, 1);
  trace_all(kTopic);
  auto traced = publish(kTopic, 1, 1);
  ASSERT_EQ(wait_for_stages(kTopic, traced[0], 2).stages.size(), 2u);
  auto none = find(kTopic, by_position(untraced[0]));
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->messages.empty());

  close_node();
  open_node();
  auto again = find(kTopic, by_position(traced[0]));
  ASSERT_TRUE(again.is_ok());
  ASSERT_EQ(again->messages.size(), 1u);
  EXPECT_EQ(names(again->messages[0]), (std::vector<std::string>{"received", "persisted"}));
}

TEST_F(TopicTracingTest, CumulativeAcksCoverEveryEntryUpToThem) {
  trace_all(kTopic);
  ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());
  auto positions = publish(kTopic, 1, 3);
  RecordingSink& sink = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 7, options("sub", SubscriptionType::kExclusive), &sink).is_ok());
  flow(kTopic, "sub", 7, 10);
  ASSERT_EQ(sink.wait_for(3).size(), 3u);
  ASSERT_TRUE(ack(kTopic, "sub", 7, positions[2], /*cumulative=*/true).is_ok());
  MessageTrace first = wait_for_stages(kTopic, positions[0], 4);
  EXPECT_EQ(names(first), (std::vector<std::string>{"received", "persisted", "dispatched", "acked"}));
  EXPECT_TRUE(first.stages[3].range);
}

TEST_F(TopicTracingTest, ABatchIsAcknowledgedOnceWhenItsLastMessageIs) {
  trace_all(kTopic);
  ASSERT_TRUE(add_producer(kTopic, 1, "p").is_ok());
  auto stored = on_topic<Result<Position>>(kTopic, [](Topic& t, auto done) {
    ledger::MessageHeader h;
    h.messages = 3;
    t.publish(1, h, Slice::copy_of("a batch of three"), done);
  });
  ASSERT_TRUE(stored.is_ok());
  RecordingSink& sink = new_sink();
  ASSERT_TRUE(subscribe(kTopic, 7, options("sub", SubscriptionType::kShared), &sink).is_ok());
  flow(kTopic, "sub", 7, 10);
  ASSERT_EQ(sink.wait_for(1).size(), 1u);
  for (uint32_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(on_topic<Status>(kTopic, [&](Topic& t, auto done) {
                  done(t.subscription("sub")->ack_batch_index(7, *stored, i, 3));
                }).is_ok());
  }
  MessageTrace m = wait_for_stages(kTopic, *stored, 4);
  EXPECT_EQ(names(m), (std::vector<std::string>{"received", "persisted", "dispatched", "acked"}));
}

TEST_F(TopicTracingTest, ClientsCannotProduceToOrSubscribeToTheTraceTopic) {
  const std::string traces = "persistent://public/default/__trace";
  EXPECT_EQ(add_producer(traces, 1, "p").code(), common::ErrorCode::kPermissionDenied);
  RecordingSink& sink = new_sink();
  EXPECT_EQ(subscribe(traces, 1, options("sub", SubscriptionType::kExclusive), &sink).code(),
            common::ErrorCode::kPermissionDenied);
}

TEST_F(TopicTracingTest, ANamespaceThatNeverTracedAnswersNothing) {
  auto a = find(kTopic, by_key("k"));
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  EXPECT_TRUE(a->messages.empty());
  EXPECT_EQ(a->events_scanned, 0u);
}

}  // namespace
}  // namespace magnetar::broker
