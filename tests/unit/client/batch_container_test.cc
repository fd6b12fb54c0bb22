#include "client/batch_container.h"

#include <gtest/gtest.h>

namespace magnetar::client {
namespace {

using Clock = std::chrono::steady_clock;

OutgoingMessage text(std::string_view payload) {
  OutgoingMessage m;
  m.payload = payload;
  return m;
}

TEST(BatchContainerTest, ClosesAtMaxMessages) {
  BatchContainer c(BatchLimits{3, 1 << 20, std::chrono::microseconds(1000)});
  auto now = Clock::now();
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(c.full());
    EXPECT_TRUE(c.has_room(5));
    c.add(text("hello"), nullptr, now);
  }
  EXPECT_TRUE(c.full());
  EXPECT_FALSE(c.has_room(5));
}

TEST(BatchContainerTest, ClosesAtMaxBytesButTakesOneOversizedMessage) {
  BatchContainer c(BatchLimits{1000, 100, std::chrono::microseconds(1000)});
  std::string big(500, 'x');
  EXPECT_TRUE(c.has_room(big.size()));  // empty: always room
  c.add(text(big), nullptr, Clock::now());
  EXPECT_TRUE(c.full());
  c.seal();
  c.add(text("a"), nullptr, Clock::now());
  EXPECT_FALSE(c.has_room(200));
  EXPECT_TRUE(c.has_room(10));
}

TEST(BatchContainerTest, DeadlineIsFirstAddPlusDelay) {
  BatchContainer c(BatchLimits{10, 1000, std::chrono::microseconds(1000)});
  auto t0 = Clock::now();
  c.add(text("a"), nullptr, t0);
  c.add(text("b"), nullptr, t0 + std::chrono::microseconds(900));
  EXPECT_EQ(c.deadline(), t0 + std::chrono::microseconds(1000));
}

TEST(BatchContainerTest, SealedBatchSplitsBackIntoTheMessages) {
  BatchContainer c(BatchLimits{});
  std::map<std::string, std::string> props{{"k", "v"}};
  int called = 0;
  OutgoingMessage one;
  one.payload = "one";
  one.key = "key-1";
  one.properties = &props;
  one.event_time_ms = 1234;
  c.add(one, [&](common::Result<MessageId>) { ++called; }, Clock::now());
  c.add(text("two"), [&](common::Result<MessageId>) { ++called; }, Clock::now());
  auto sealed = c.seal();
  EXPECT_TRUE(c.empty());
  ASSERT_EQ(sealed.count, 2);
  ASSERT_EQ(sealed.callbacks.size(), 2u);
  auto split = protocol::pulsar::split_batch(sealed.payload, sealed.count);
  ASSERT_TRUE(split.is_ok()) << split.status().message();
  ASSERT_EQ(split->size(), 2u);
  EXPECT_EQ((*split)[0].payload.to_string(), "one");
  EXPECT_EQ((*split)[0].metadata.partition_key(), "key-1");
  EXPECT_EQ((*split)[0].metadata.event_time(), 1234u);
  ASSERT_EQ((*split)[0].metadata.properties_size(), 1);
  EXPECT_EQ((*split)[0].metadata.properties(0).value(), "v");
  EXPECT_EQ((*split)[1].payload.to_string(), "two");
  for (auto& cb : sealed.callbacks) cb(MessageId{});
  EXPECT_EQ(called, 2);
  // The container is ready for the next batch.
  c.add(text("three"), nullptr, Clock::now());
  auto next = c.seal();
  EXPECT_EQ(next.count, 1);
}

}  // namespace
}  // namespace magnetar::client
