#include "runtime/mailbox.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

namespace magnetar::runtime {
namespace {

TEST(MailboxTest, FifoForOneProducer) {
  Mailbox box(8);
  std::vector<int> out;
  for (int i = 0; i < 5; ++i) {
    Task t = [&out, i]() { out.push_back(i); };
    ASSERT_TRUE(box.try_push(t));
  }
  Task t;
  while (box.try_pop(t)) t();
  EXPECT_EQ(out, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(MailboxTest, FullRefusesAndKeepsTheTask) {
  Mailbox box(4);
  int ran = 0;
  for (int i = 0; i < 4; ++i) {
    Task t = [&ran]() { ++ran; };
    ASSERT_TRUE(box.try_push(t));
  }
  Task extra = [&ran]() { ran += 100; };
  EXPECT_FALSE(box.try_push(extra));
  EXPECT_TRUE(static_cast<bool>(extra));  // still ours to retry
  Task t;
  ASSERT_TRUE(box.try_pop(t));
  t();
  EXPECT_TRUE(box.try_push(extra));  // room again
  while (box.try_pop(t)) t();
  EXPECT_EQ(ran, 104);
}

TEST(MailboxTest, EachTaskKeepsItsStamp) {
  Mailbox box(2);
  for (int round = 0; round < 3; ++round) {  // wraps the ring
    for (int64_t stamp : {int64_t{7} + round, int64_t{8} + round}) {
      Task t = []() {};
      ASSERT_TRUE(box.try_push(t, stamp));
    }
    Task t;
    int64_t stamp = 0;
    ASSERT_TRUE(box.try_pop(t, &stamp));
    EXPECT_EQ(stamp, 7 + round);
    ASSERT_TRUE(box.try_pop(t, &stamp));
    EXPECT_EQ(stamp, 8 + round);
  }
}

TEST(MailboxTest, DropsUnrunTasksOnDestruction) {
  auto alive = std::make_shared<int>(1);
  {
    Mailbox box(4);
    Task t = [alive]() {};
    ASSERT_TRUE(box.try_push(t));
    EXPECT_EQ(alive.use_count(), 2);
  }
  EXPECT_EQ(alive.use_count(), 1);
}

// Several producers, one consumer, a small ring so it wraps and fills often:
// every task arrives exactly once and each producer's tasks arrive in order.
TEST(MailboxTest, ManyProducersKeepPerProducerOrderUnderLoad) {
  constexpr int kProducers = 4;
  constexpr int kPerProducer = 200000;
  Mailbox box(256);
  std::vector<int> next(kProducers, 0);
  std::atomic<bool> order_broken{false};
  std::atomic<int> done_producers{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p]() {
      for (int i = 0; i < kPerProducer; ++i) {
        Task t = [&, p, i]() {
          if (next[p] != i) order_broken = true;
          next[p] = i + 1;
        };
        while (!box.try_push(t)) std::this_thread::yield();
      }
      done_producers.fetch_add(1);
    });
  }
  long consumed = 0;
  Task t;
  while (consumed < static_cast<long>(kProducers) * kPerProducer) {
    if (box.try_pop(t)) {
      t();
      t.reset();
      ++consumed;
    } else {
      std::this_thread::yield();
    }
  }
  for (auto& th : producers) th.join();
  EXPECT_FALSE(order_broken.load());
  for (int p = 0; p < kProducers; ++p) EXPECT_EQ(next[p], kPerProducer);
  EXPECT_FALSE(box.try_pop(t));
}

TEST(TaskTest, LargeCapturesAreBoxedAndMoveOnlyWorks) {
  std::array<char, 200> big{};
  big[199] = 'q';
  char seen = 0;
  Task t = [big, &seen]() { seen = big[199]; };
  Task moved = std::move(t);
  EXPECT_FALSE(static_cast<bool>(t));
  moved();
  EXPECT_EQ(seen, 'q');
  auto owned = std::make_unique<int>(5);
  int got = 0;
  Task u = [p = std::move(owned), &got]() { got = *p; };
  u();
  EXPECT_EQ(got, 5);
}

TEST(TaskTest, TypeNamesTheCallableHeldInlineOrBoxed) {
  auto small = []() {};
  std::array<char, 200> big{};
  auto large = [big]() { (void)big; };
  Task a(small);
  Task b(large);
  EXPECT_EQ(a.type(), typeid(small));
  EXPECT_EQ(b.type(), typeid(large));
  Task moved = std::move(b);
  EXPECT_EQ(moved.type(), typeid(large));
  EXPECT_EQ(Task().type(), typeid(void));
}

}  // namespace
}  // namespace magnetar::runtime
