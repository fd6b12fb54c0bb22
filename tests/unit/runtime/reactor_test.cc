#include "runtime/reactor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "runtime/runtime.h"

namespace magnetar::runtime {
namespace {

TEST(ReactorTest, RunsPostedTasksOnItsOwnThread) {
  Reactor r(0, "reactor-test");
  r.start();
  EXPECT_FALSE(r.is_on_thread());
  std::promise<std::thread::id> where;
  ASSERT_TRUE(r.post([&]() {
    EXPECT_TRUE(r.is_on_thread());
    EXPECT_EQ(Reactor::current(), &r);
    where.set_value(std::this_thread::get_id());
  }).is_ok());
  EXPECT_NE(where.get_future().get(), std::this_thread::get_id());
  EXPECT_EQ(r.run_sync([]() { return 7; }), 7);
  r.stop();
}

// Many threads post to one reactor: every task runs once, each sender's
// tasks in its order.
TEST(ReactorTest, DeliversEveryTaskInSenderOrderAcrossThreads) {
  constexpr int kSenders = 4;
  constexpr int kPerSender = 50000;
  Reactor r(0, "reactor-test", 1024);
  r.start();
  std::vector<int> next(kSenders, 0);  // touched only on the reactor
  std::atomic<int> broken{0};
  std::atomic<long> ran{0};
  std::vector<std::thread> senders;
  for (int s = 0; s < kSenders; ++s) {
    senders.emplace_back([&, s]() {
      for (int i = 0; i < kPerSender; ++i) {
        ASSERT_TRUE(r.post_or_wait([&, s, i]() {
          if (next[s] != i) broken.fetch_add(1);
          next[s] = i + 1;
          ran.fetch_add(1);
        }));
      }
    });
  }
  for (auto& t : senders) t.join();
  r.run_sync([]() {});  // everything posted before this has run
  EXPECT_EQ(ran.load(), static_cast<long>(kSenders) * kPerSender);
  EXPECT_EQ(broken.load(), 0);
  r.stop();
}

// One sender posts a task and waits for it before the next, so that every
// post lands while the loop is going to sleep or just waking: a wake-up lost
// between the loop reading its eventfd and draining the mailbox leaves the
// task unrun until something else wakes the loop.
TEST(ReactorTest, NoWakeUpIsLostWhenEveryPostWaitsForItsTask) {
  constexpr int kRoundTrips = 50000;
  Reactor r(0, "reactor-test");
  r.start();
  int lost = 0;
  for (int i = 0; i < kRoundTrips && lost == 0; ++i) {
    std::promise<void> ran;
    auto done = ran.get_future();
    ASSERT_TRUE(r.post([&ran]() { ran.set_value(); }).is_ok());
    if (done.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      ++lost;
      r.run_sync([]() {});  // another post wakes the loop, and the lost task runs first
    }
  }
  EXPECT_EQ(lost, 0);
  r.stop();
}

TEST(ReactorTest, FullMailboxIsAnErrorNotABuffer) {
  Reactor r(0, "reactor-test", 4);
  r.start();
  std::promise<void> release;
  auto gate = release.get_future().share();
  ASSERT_TRUE(r.post([gate]() { gate.wait(); }).is_ok());
  // The reactor is busy in the first task: the next posts fill the ring.
  int accepted = 0;
  common::Status last;
  for (int i = 0; i < 10; ++i) {
    last = r.post([]() {});
    if (last.is_ok()) ++accepted;
  }
  EXPECT_LE(accepted, 4);
  EXPECT_EQ(last.code(), common::ErrorCode::kResourceExhausted);
  release.set_value();
  r.run_sync([]() {});
  r.stop();
}

// A reactor answering another whose mailbox is full neither drops the task
// nor blocks: it retries on its own next loop iterations.
TEST(ReactorTest, PostReliablyFromAReactorSurvivesAFullMailbox) {
  Reactor busy(0, "reactor-busy", 4);
  Reactor sender(1, "reactor-sender");
  busy.start();
  sender.start();
  std::promise<void> release;
  auto gate = release.get_future().share();
  ASSERT_TRUE(busy.post([gate]() { gate.wait(); }).is_ok());
  std::atomic<int> ran{0};
  std::atomic<bool> in_order{true};
  sender.run_sync([&]() {
    for (int i = 0; i < 20; ++i) {
      EXPECT_TRUE(busy.post_reliably([&ran, &in_order, i]() {
        if (ran.fetch_add(1) != i) in_order = false;
      }));
    }
  });
  EXPECT_EQ(ran.load(), 0);  // `busy` is still blocked; nothing was lost or run
  release.set_value();
  for (int i = 0; i < 2000 && ran.load() < 20; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(ran.load(), 20);
  EXPECT_TRUE(in_order.load());  // one sender's tasks keep their order through the retries
  sender.stop();
  busy.stop();
}

TEST(ReactorTest, PostAfterStopIsRefused) {
  Reactor r(0, "reactor-test");
  r.start();
  r.stop();
  EXPECT_EQ(r.post([]() {}).code(), common::ErrorCode::kUnavailable);
  EXPECT_FALSE(r.post_or_wait([]() {}));
  r.stop();  // idempotent
}

TEST(ReactorTest, DeferredTasksRunBeforeTheLoopSleeps) {
  Reactor r(0, "reactor-test");
  r.start();
  std::promise<std::vector<int>> result;
  auto order = std::make_shared<std::vector<int>>();
  ASSERT_TRUE(r.post([&, order]() {
    r.defer([order, &r, &result]() {
      order->push_back(2);
      // Deferred from a deferred task: still runs without new I/O.
      r.defer([order, &result]() {
        order->push_back(3);
        result.set_value(*order);
      });
    });
    order->push_back(1);
  }).is_ok());
  auto fut = result.get_future();
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(fut.get(), (std::vector<int>{1, 2, 3}));
  r.stop();
}

TEST(ReactorTest, LagProbeMeasuresAWaitingTask) {
  Reactor r(0, "reactor-test");
  r.start();
  std::promise<void> release;
  auto gate = release.get_future().share();
  ASSERT_TRUE(r.post([gate]() { gate.wait(); }).is_ok());
  r.probe_lag();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // The probe is still queued behind the blocked task: its age counts.
  EXPECT_GE(r.loop_lag(), std::chrono::milliseconds(20));
  release.set_value();
  r.run_sync([]() {});
  EXPECT_GE(r.loop_lag(), std::chrono::milliseconds(20));  // the measured wait
  r.stop();
}

TEST(RuntimeTest, RoundRobinAndHomeAreStable) {
  Runtime rt(3);
  rt.start();
  EXPECT_EQ(rt.size(), 3u);
  std::vector<size_t> picks;
  for (int i = 0; i < 6; ++i) picks.push_back(rt.next().index());
  EXPECT_EQ(picks, (std::vector<size_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(&rt.home_for(42), &rt.home_for(42));
  EXPECT_EQ(rt.home_for(4).index(), 1u);
  for (size_t i = 0; i < rt.size(); ++i) {
    EXPECT_EQ(rt.reactor(i).run_sync([]() { return Reactor::current()->name(); }),
              "reactor-" + std::to_string(i));
  }
  rt.stop();
}

}  // namespace
}  // namespace magnetar::runtime
