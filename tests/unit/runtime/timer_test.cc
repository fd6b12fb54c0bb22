#include "runtime/timer.h"

#include <gtest/gtest.h>

#include <future>
#include <memory>

namespace magnetar::runtime {
namespace {

constexpr auto kBound = std::chrono::seconds(10);

TEST(TimerTest, OnceFiresOnce) {
  Reactor r(0, "reactor-test");
  r.start();
  std::promise<void> fired;
  auto count = std::make_shared<int>(0);
  std::unique_ptr<Timer> timer;
  r.run_sync([&]() {
    timer = std::make_unique<Timer>(r);
    timer->once(std::chrono::milliseconds(5), [&, count]() {
      if (++*count == 1) fired.set_value();
    });
  });
  ASSERT_EQ(fired.get_future().wait_for(kBound), std::future_status::ready);
  r.run_sync([&]() {
    EXPECT_FALSE(timer->active());
    timer.reset();
  });
  EXPECT_EQ(*count, 1);
  r.stop();
}

TEST(TimerTest, EveryRepeatsUntilCancelled) {
  Reactor r(0, "reactor-test");
  r.start();
  std::promise<void> third;
  int count = 0;
  std::unique_ptr<Timer> timer;
  r.run_sync([&]() {
    timer = std::make_unique<Timer>(r);
    timer->every(std::chrono::milliseconds(2), [&]() {
      if (++count == 3) {
        timer->cancel();
        third.set_value();
      }
    });
  });
  ASSERT_EQ(third.get_future().wait_for(kBound), std::future_status::ready);
  r.run_sync([&]() { EXPECT_FALSE(timer->active()); });
  EXPECT_EQ(r.run_sync([&]() { return count; }), 3);
  r.run_sync([&]() { timer.reset(); });
  r.stop();
}

TEST(TimerTest, DestroyedTimerNeverFires) {
  Reactor r(0, "reactor-test");
  r.start();
  bool fired = false;
  r.run_sync([&]() {
    Timer t(r);
    t.once(std::chrono::milliseconds(1), [&]() { fired = true; });
  });  // destroyed before the loop could fire it
  std::promise<void> later;
  std::unique_ptr<Timer> probe;
  r.run_sync([&]() {
    probe = std::make_unique<Timer>(r);
    probe->once(std::chrono::milliseconds(20), [&]() { later.set_value(); });
  });
  ASSERT_EQ(later.get_future().wait_for(kBound), std::future_status::ready);
  EXPECT_FALSE(fired);
  r.run_sync([&]() { probe.reset(); });
  r.stop();
}

// once() from inside the timer's own callback replaces the callable that is
// running: the running one must survive until it returns.
TEST(TimerTest, OnceCanReArmFromItsOwnCallback) {
  Reactor r(0, "reactor-test");
  r.start();
  std::promise<void> second;
  auto witness = std::make_shared<int>(0);
  std::unique_ptr<Timer> timer;
  r.run_sync([&]() {
    timer = std::make_unique<Timer>(r);
    timer->once(std::chrono::milliseconds(1), [&, witness]() {
      timer->once(std::chrono::milliseconds(1), [&second]() { second.set_value(); });
      ++*witness;  // a capture of the callable that was replaced
    });
  });
  ASSERT_EQ(second.get_future().wait_for(kBound), std::future_status::ready);
  EXPECT_EQ(r.run_sync([&]() { return *witness; }), 1);
  r.run_sync([&]() { timer.reset(); });
  EXPECT_EQ(witness.use_count(), 1);  // the fired callable was released
  r.stop();
}

TEST(TimerTest, CallbackMayDestroyItsTimer) {
  Reactor r(0, "reactor-test");
  r.start();
  std::promise<void> done;
  auto witness = std::make_shared<int>(0);
  std::unique_ptr<Timer> timer;
  r.run_sync([&]() {
    timer = std::make_unique<Timer>(r);
    timer->every(std::chrono::milliseconds(1), [&, witness]() {
      timer.reset();
      ++*witness;
      done.set_value();
    });
  });
  ASSERT_EQ(done.get_future().wait_for(kBound), std::future_status::ready);
  r.run_sync([]() {});
  EXPECT_EQ(witness.use_count(), 1);
  r.stop();
}

}  // namespace
}  // namespace magnetar::runtime
