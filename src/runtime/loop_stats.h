// LoopStats: how long work waits for a reactor and how long the reactor's
// loop runs between polls, for operators, and a warning that names work
// which held the loop.
//
//   magnetar_reactor_mailbox_wait_seconds{reactor}    posted -> began to run, a sample of mailbox tasks
//                                                     (one post in 64 per posting thread)
//   magnetar_reactor_busy_seconds{reactor}            one loop iteration, poll's return to the next poll
//                                                     (I/O callbacks, timers, mailbox and deferred tasks)
//   magnetar_reactor_slow_callbacks_total{reactor}    callbacks (or iterations) that ran past the threshold
//
// While a reactor runs one callback nothing else it owns moves: its
// connections are not read, its mailbox waits. A callback that runs past
// the slow threshold (default 20 ms) is logged at WARN with its name, the
// demangled type of the callable (a lambda is named by the function that
// wrote it), at most once per kWarnInterval per reactor; the lines not
// written are counted in the next. An iteration past the threshold in
// which no single callback was slow is logged as I/O callbacks and short
// tasks adding up, with the share of it the thread spent on a CPU: what
// is left it waited for a core.
//
// Threads: the recording functions run on the reactor's own thread only;
// the histograms and the counter may be read from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <typeinfo>

#include "common/metrics.h"

namespace magnetar::runtime {

class LoopStats {
 public:
  static constexpr std::chrono::milliseconds kDefaultSlowThreshold{20};
  static constexpr std::chrono::seconds kWarnInterval{10};

  // `reactor_name` is used in log lines; the series are labelled by `index`.
  LoopStats(size_t index, std::string reactor_name);

  // A mailbox task posted at `posted_ns` (common::monotonic_ns) starts now, at `now_ns`.
  void task_waited(int64_t posted_ns, int64_t now_ns) {
    wait_.observe(posted_ns != 0 && now_ns > posted_ns ? static_cast<double>(now_ns - posted_ns) / 1e9 : 0);
  }
  // A callback of type `what` ran from `start_ns` to `end_ns` (`kind`: "task", "timer", "deferred task").
  void callback_ran(const char* kind, const std::type_info& what, int64_t start_ns, int64_t end_ns) {
    if (end_ns - start_ns >= slow_ns_.load(std::memory_order_relaxed)) slow(kind, what, end_ns - start_ns, end_ns);
  }
  // The loop is about to poll: `busy_ns` is how long it ran since the last
  // poll returned, of which the thread was on a CPU for `cpu_ns` (the rest
  // it was runnable but waiting for one: a machine with more busy threads
  // than cores). `cpu_ns` is needed, and read, only for a slow iteration.
  void iteration_ran(int64_t busy_ns, int64_t cpu_ns, int64_t now_ns);
  // Whether an iteration that ran `busy_ns` is slow (iteration_ran reports it
  // and wants its CPU time).
  bool slow_iteration(int64_t busy_ns) const { return busy_ns >= slow_ns_.load(std::memory_order_relaxed); }

  // Any thread. Callbacks that run at least `threshold` count as slow.
  void set_slow_threshold(std::chrono::nanoseconds threshold) {
    slow_ns_.store(threshold.count(), std::memory_order_relaxed);
  }
  uint64_t slow_callbacks() const { return slow_count_.value(); }
  const common::Histogram& mailbox_wait() const { return wait_; }
  const common::Histogram& busy() const { return busy_; }

  // The demangled name of a callable's type, for log lines.
  static std::string name_of(const std::type_info& what);

 private:
  void slow(const char* kind, const std::type_info& what, int64_t ran_ns, int64_t now_ns);
  // Writes `line` unless one was written less than kWarnInterval ago.
  void warn(const std::string& line, int64_t now_ns);

  const std::string reactor_name_;
  common::Histogram& wait_;
  common::Histogram& busy_;
  common::Counter& slow_count_;
  std::atomic<int64_t> slow_ns_;
  bool slow_in_iteration_ = false;  // a callback in this iteration was reported slow already
  int64_t last_warn_ns_ = 0;
  uint64_t not_logged_ = 0;
};

}  // namespace magnetar::runtime
