#include "runtime/worker_thread.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "common/logging.h"
#include "runtime/reactor.h"

namespace magnetar::runtime {
namespace {

TEST(WorkerThreadTest, BlockingWorkReportsBackToTheAskingReactor) {
  Reactor r(0, "reactor-test");
  r.start();
  WorkerThread worker("metadata");
  std::promise<std::pair<std::string, bool>> answer;
  r.run_sync([&]() {
    ASSERT_TRUE(worker.post([&]() {
      std::string name(common::thread_name());  // runs on the worker
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // blocking is fine here
      r.post_or_wait([&, name]() { answer.set_value({name, r.is_on_thread()}); });
    }).is_ok());
  });
  auto got = answer.get_future().get();
  EXPECT_EQ(got.first, "metadata");
  EXPECT_TRUE(got.second);
  worker.stop();
  r.stop();
}

TEST(WorkerThreadTest, BoundedQueueAndStopRunsWhatWasQueued) {
  WorkerThread worker("worker-test", 2);
  std::promise<void> release;
  auto gate = release.get_future().share();
  std::atomic<int> ran{0};
  ASSERT_TRUE(worker.post([gate, &ran]() { gate.wait(); ran++; }).is_ok());
  // The worker may or may not have taken the first task yet: at most 2 wait.
  int accepted = 0;
  common::Status last;
  for (int i = 0; i < 5; ++i) {
    last = worker.post([&ran]() { ran++; });
    if (last.is_ok()) ++accepted;
  }
  EXPECT_EQ(last.code(), common::ErrorCode::kResourceExhausted);
  release.set_value();
  worker.stop();
  EXPECT_EQ(ran.load(), 1 + accepted);
  EXPECT_EQ(worker.post([]() {}).code(), common::ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace magnetar::runtime
