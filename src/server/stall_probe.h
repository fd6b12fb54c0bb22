// StallProbe: how long this node's threads could not run when they were
// ready to, so that a publish's slow moment can be told apart from the
// broker's own work.
//
// A thread ("stall-probe") sleeps to a deadline every `interval` and
// measures how late it woke. Of that lateness, the kernel's run-queue delay
// for the thread (/proc/thread-self/schedstat) is time it waited for a core
// on this machine (other busy threads, here or in other processes); the
// rest is time the machine ran nothing of it at all: the hypervisor ran
// another guest, the VM or the process was paused (SIGSTOP, a debugger),
// or timer interrupts were held off. Every wake is recorded:
//
//   magnetar_node_stall_seconds{part="late"}       the whole lateness
//   magnetar_node_stall_seconds{part="run_queue"}  of it, waiting for a core here
//   magnetar_node_stall_seconds{part="absent"}     of it, the machine not running it
//
// Every thread of the node is exposed to the same stalls, so their rate is
// a floor under the tail of every latency the node reports. A wake later
// than `warn_at` is logged at WARN, at most once per 10 s (the lines not
// written are counted in the next). Costs one wake-up and one procfs read
// per interval while the node works; while its reactors ran fewer than
// kActiveIterations loop iterations in the last second it sleeps
// `idle_interval` instead, so an idle node wakes once a second.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "common/metrics.h"

namespace magnetar::server {

class StallProbe {
 public:
  // Loop iterations a second (all reactors) from which the node counts as working.
  static constexpr uint64_t kActiveIterations = 100;

  struct Options {
    std::chrono::milliseconds interval{10};
    std::chrono::milliseconds idle_interval{1000};
    std::chrono::milliseconds warn_at{50};
    // A count that grows as the node works (its reactors' loop
    // iterations); null: always working.
    std::function<uint64_t()> activity;
  };

  // How one wake's lateness divides (nanoseconds). `run_delay` is the
  // run-queue delay that accrued over the same sleep, -1 when the kernel
  // does not report it (then all of it is counted as absent).
  struct Split {
    int64_t run_queue = 0;
    int64_t absent = 0;
  };
  static Split split(int64_t late, int64_t run_delay);

  explicit StallProbe(Options options);
  ~StallProbe();  // stop()
  StallProbe(const StallProbe&) = delete;
  StallProbe& operator=(const StallProbe&) = delete;

  void start();
  // Wakes the thread and joins it. Idempotent.
  void stop();

  // One wake observed: records it and warns when it was late past warn_at.
  // The probe's thread only (public for tests).
  void observe(int64_t late_ns, int64_t run_delay_ns, int64_t now_ns);

 private:
  void run();
  // The sleep before the next wake: `interval` while working, else `idle_interval`.
  std::chrono::milliseconds next_interval(std::chrono::steady_clock::time_point now);
  // Run-queue delay of the calling thread so far (ns); -1 if unknown.
  int64_t run_delay_ns();

  const Options options_;
  common::Histogram& late_;
  common::Histogram& run_queue_;
  common::Histogram& absent_;
  int schedstat_fd_ = -1;
  int64_t last_warn_ns_ = 0;
  bool working_ = false;  // with activity: idle until a second shows otherwise
  uint64_t window_activity_ = 0;  // activity() when the current second began
  std::chrono::steady_clock::time_point window_start_{};
  uint64_t unwarned_ = 0;  // stalls past warn_at not logged since the last line

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace magnetar::server
