#include "server/stall_probe.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace magnetar::server {
namespace {

// The count of magnetar_node_stall_seconds{part} at or below `le` (as the
// text exposition writes it), from the process's registry.
uint64_t stall_bucket(const std::string& part, const std::string& le) {
  const std::string text = common::MetricsRegistry::global().render();
  const std::string key = "magnetar_node_stall_seconds_bucket{part=\"" + part + "\",le=\"" + le + "\"} ";
  size_t at = text.find(key);
  if (at == std::string::npos) return 0;
  return std::stoull(text.substr(at + key.size()));
}

uint64_t stall_count(const std::string& part) { return stall_bucket(part, "+Inf"); }

TEST(StallProbeTest, SplitsLatenessIntoRunQueueAndAbsent) {
  EXPECT_EQ(StallProbe::split(5'000'000, 2'000'000).run_queue, 2'000'000);
  EXPECT_EQ(StallProbe::split(5'000'000, 2'000'000).absent, 3'000'000);
  // The run queue cannot account for more than the lateness itself.
  EXPECT_EQ(StallProbe::split(1'000'000, 4'000'000).run_queue, 1'000'000);
  EXPECT_EQ(StallProbe::split(1'000'000, 4'000'000).absent, 0);
  // Unknown run-queue delay: all of it is counted as absent.
  EXPECT_EQ(StallProbe::split(3'000'000, -1).run_queue, 0);
  EXPECT_EQ(StallProbe::split(3'000'000, -1).absent, 3'000'000);
  // Woken early (a spurious wake-up) is not late.
  EXPECT_EQ(StallProbe::split(-10, 0).absent, 0);
}

TEST(StallProbeTest, ALongStallLandsInItsBucket) {
  StallProbe probe(StallProbe::Options{});
  const uint64_t late_before = stall_count("late");
  const uint64_t long_before = stall_count("absent") - stall_bucket("absent", "0.1");
  probe.observe(150'000'000, 10'000'000, 1);  // 150 ms late, 10 ms of it queued for a core
  EXPECT_EQ(stall_count("late"), late_before + 1);
  // 140 ms absent: above the 0.1 s bound.
  EXPECT_EQ(stall_count("absent") - stall_bucket("absent", "0.1"), long_before + 1);
}

TEST(StallProbeTest, TheThreadRecordsAWakeEveryInterval) {
  StallProbe::Options options;
  options.interval = std::chrono::milliseconds(1);
  StallProbe probe(options);
  const uint64_t before = stall_count("late");
  probe.start();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (stall_count("late") < before + 20 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  probe.stop();
  EXPECT_GE(stall_count("late"), before + 20);
  // Each wake is split as well.
  EXPECT_EQ(stall_count("run_queue"), stall_count("late"));
  EXPECT_EQ(stall_count("absent"), stall_count("late"));
  // Stopped: no more wakes.
  const uint64_t stopped = stall_count("late");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(stall_count("late"), stopped);
  probe.stop();  // idempotent
}

TEST(StallProbeTest, AnIdleNodeIsProbedOnceInAWhile) {
  std::atomic<uint64_t> iterations{0};
  StallProbe::Options options;
  options.interval = std::chrono::milliseconds(1);
  options.idle_interval = std::chrono::milliseconds(200);
  options.activity = [&] { return iterations.load(); };
  StallProbe probe(options);
  const uint64_t before = stall_count("late");
  probe.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // Idle: about one wake per 200 ms, not one per 1 ms.
  EXPECT_LE(stall_count("late") - before, 5u);
  EXPECT_GE(stall_count("late") - before, 1u);

  // Working (far more than kActiveIterations a second): once the next
  // second's figure is in, a wake every 1 ms.
  const uint64_t idle = stall_count("late");
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (stall_count("late") < idle + 100 && std::chrono::steady_clock::now() < give_up) {
    iterations += 1000;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  probe.stop();
  EXPECT_GE(stall_count("late"), idle + 100);
}

}  // namespace
}  // namespace magnetar::server
