#include "runtime/loop_stats.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "runtime/reactor.h"
#include "runtime/timer.h"

namespace magnetar::runtime {
namespace {

using std::chrono::milliseconds;
constexpr int64_t kMs = 1'000'000;

// Each test labels its series with its own reactor index: the registry is
// process-wide.
TEST(LoopStatsTest, CountsCallbacksAtOrPastTheThresholdOnly) {
  LoopStats stats(901, "reactor-901");
  const uint64_t before = stats.slow_callbacks();
  stats.callback_ran("a task", typeid(int), 100 * kMs, 100 * kMs + 19 * kMs);
  EXPECT_EQ(stats.slow_callbacks(), before);
  stats.callback_ran("a task", typeid(int), 200 * kMs, 200 * kMs + 20 * kMs);
  EXPECT_EQ(stats.slow_callbacks(), before + 1);
  stats.set_slow_threshold(milliseconds(5));
  stats.callback_ran("a timer", typeid(int), 300 * kMs, 300 * kMs + 6 * kMs);
  EXPECT_EQ(stats.slow_callbacks(), before + 2);
}

TEST(LoopStatsTest, ASlowIterationIsCountedOnceWhateverRanInIt) {
  LoopStats stats(902, "reactor-902");
  const uint64_t before = stats.slow_callbacks();
  const uint64_t iterations = stats.busy().count();
  // One slow task inside a slow iteration: one slow event, not two.
  stats.callback_ran("a task", typeid(int), 0, 30 * kMs);
  stats.iteration_ran(31 * kMs, 31 * kMs, 31 * kMs);
  EXPECT_EQ(stats.slow_callbacks(), before + 1);
  // Many short callbacks adding up: the iteration itself is the slow event.
  stats.iteration_ran(25 * kMs, 2 * kMs, 60 * kMs);
  EXPECT_EQ(stats.slow_callbacks(), before + 2);
  stats.iteration_ran(1 * kMs, 1 * kMs, 61 * kMs);
  EXPECT_EQ(stats.slow_callbacks(), before + 2);
  EXPECT_EQ(stats.busy().count(), iterations + 3);
}

TEST(LoopStatsTest, RecordsTheWaitOfEveryTask) {
  LoopStats stats(903, "reactor-903");
  const uint64_t before = stats.mailbox_wait().count();
  stats.task_waited(10 * kMs, 12 * kMs);
  stats.task_waited(0, 12 * kMs);  // not stamped: counted as no wait
  EXPECT_EQ(stats.mailbox_wait().count(), before + 2);
}

void a_function_that_posts() {}

TEST(LoopStatsTest, NamesALambdaByTheFunctionThatWroteIt) {
  auto lambda = []() { a_function_that_posts(); };
  Task task(lambda);
  const std::string name = LoopStats::name_of(task.type());
  EXPECT_NE(name.find("LoopStatsTest_NamesALambdaByTheFunctionThatWroteIt"), std::string::npos) << name;
  EXPECT_NE(name.find("lambda"), std::string::npos) << name;
  EXPECT_EQ(LoopStats::name_of(typeid(int)), "int");
}

// A reactor reports a task that held it, and the wait of a sample of tasks.
TEST(LoopStatsTest, AReactorCountsATaskThatHeldIt) {
  Reactor r(904, "reactor-904");
  r.loop_stats().set_slow_threshold(milliseconds(1));
  r.start();
  const uint64_t slow_before = r.loop_stats().slow_callbacks();
  const uint64_t waits_before = r.loop_stats().mailbox_wait().count();
  // Tasks are timed with the coarse clock: longer than its tick.
  r.run_sync([]() { std::this_thread::sleep_for(milliseconds(30)); });
  const int posts = 4 * Reactor::kWaitSampleEvery;
  for (int i = 0; i < posts; ++i) ASSERT_TRUE(r.post([]() {}).is_ok());
  r.run_sync([]() {});  // everything posted before this has run
  EXPECT_GE(r.loop_stats().slow_callbacks(), slow_before + 1);
  // One post in kWaitSampleEvery from this thread carried its time.
  EXPECT_GE(r.loop_stats().mailbox_wait().count(), waits_before + posts / Reactor::kWaitSampleEvery);
  // An iteration is recorded when the loop next polls, after the task that
  // answered run_sync: keep it iterating until one is.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (r.loop_stats().busy().count() == 0 && std::chrono::steady_clock::now() < give_up) {
    r.run_sync([]() {});
  }
  EXPECT_GT(r.loop_stats().busy().count(), 0u);
  r.stop();
}

TEST(LoopStatsTest, AReactorCountsATimerThatHeldIt) {
  Reactor r(905, "reactor-905");
  r.loop_stats().set_slow_threshold(milliseconds(1));
  r.start();
  const uint64_t slow_before = r.loop_stats().slow_callbacks();
  std::promise<void> fired;
  std::unique_ptr<Timer> timer;
  r.run_sync([&]() {
    timer = std::make_unique<Timer>(r);
    timer->once(milliseconds(1), [&]() {
      std::this_thread::sleep_for(milliseconds(5));
      fired.set_value();
    });
  });
  ASSERT_EQ(fired.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  r.run_sync([&]() { timer.reset(); });
  EXPECT_GE(r.loop_stats().slow_callbacks(), slow_before + 1);
  r.stop();
}

}  // namespace
}  // namespace magnetar::runtime
