// Reactor: one thread running one libuv loop.
//
// Everything a reactor owns (connections, timers, topic state) is touched only
// on its thread. Other threads reach it through post(), its only cross-thread
// entry point: tasks go into a bounded lock-free mailbox and a write to the
// reactor's eventfd wakes the loop. Tasks from one sender run in the order they were posted.
// A reactor never blocks: blocking work goes to a WorkerThread.
#pragma once

#include <uv.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <cstdint>
#include <future>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "runtime/loop_stats.h"
#include "runtime/mailbox.h"
#include "runtime/task.h"

namespace magnetar::runtime {

class Reactor {
 public:
  static constexpr size_t kDefaultMailboxCapacity = 1 << 16;
  // Mailbox tasks run per wake-up before the loop polls I/O again.
  static constexpr size_t kMaxTasksPerWakeup = 1024;
  // One post in this many (per posting thread) carries its time, for the
  // mailbox wait histogram.
  static constexpr uint32_t kWaitSampleEvery = 64;

  Reactor(size_t index, std::string name, size_t mailbox_capacity = kDefaultMailboxCapacity);
  ~Reactor();  // stops and joins if still running
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;

  // Starts the thread; returns once its loop is ready to take posts.
  void start();
  // Any thread but this reactor's own: asks the loop to close every handle
  // still open, waits for the thread to exit. Idempotent.
  void stop();

  // Any thread. Queues `task` to run on this reactor. Returns
  // ResourceExhausted when the mailbox is full (task not queued) and
  // Unavailable once the reactor is stopping.
  common::Status post(Task task);
  // Any thread. Like post(), but a task that was not queued stays in `task`
  // for the caller to run, hold or retry.
  common::Status try_post(Task& task);
  // Off-reactor threads only (journal, metadata, main): like post(), but waits
  // for space instead of failing when the mailbox is full. Returns false only
  // when the reactor is stopping.
  bool post_or_wait(Task task);

  // Any thread: queues `task` without ever dropping it for a full mailbox
  // and without blocking a reactor. From a reactor, a full mailbox is
  // retried on the caller's next loop iteration (two reactors never wait on
  // each other); from any other thread it waits for room. Returns false, and
  // drops the task, only once this reactor is stopping.
  bool post_reliably(Task task);

  // Runs `fn` on this reactor and returns its result. REQUIRES: the reactor
  // is running, and the caller is not another reactor (it blocks).
  template <typename F>
  auto run_sync(F&& fn) -> std::invoke_result_t<F&> {
    using R = std::invoke_result_t<F&>;
    if (is_on_thread()) return fn();
    std::promise<R> done;
    auto fut = done.get_future();
    bool posted = post_or_wait([&]() {
      if constexpr (std::is_void_v<R>) {
        fn();
        done.set_value();
      } else {
        done.set_value(fn());
      }
    });
    if (!posted) die_stopped();  // a caller bug: nobody would ever answer
    return fut.get();
  }

  // Runs `task` on this thread before the loop next waits for I/O. Used to
  // batch work (e.g. one writev per connection per loop iteration).
  // REQUIRES: on this reactor's thread.
  void defer(Task task);

  bool is_on_thread() const { return current() == this; }
  void assert_on_thread() const;
  static Reactor* current();

  uv_loop_t* loop() { return &loop_; }
  size_t index() const { return index_; }
  const std::string& name() const { return name_; }
  size_t mailbox_depth() const { return mailbox_.size_approx(); }
  // Loop lag: how long a task posted now waits before it runs. Measured by a
  // probe task that probe_lag() posts, so an idle reactor never wakes up for
  // it. While a probe is outstanding the lag is at least its age, so a
  // blocked reactor shows up as a growing lag. Any thread.
  std::chrono::nanoseconds loop_lag() const;
  // Any thread: posts a probe unless one is already outstanding.
  void probe_lag();
  // How long tasks wait and the loop runs; recording on this thread only
  // (Timer reports its callbacks here), reading from any.
  LoopStats& loop_stats() { return stats_; }

 private:
  [[noreturn]] void die_stopped() const;
  enum class PushResult { kPushed, kFull, kStopping };
  PushResult push(Task& task);
  // On this reactor: pushes the tasks waiting for room in `target`, in
  // order, and tries again next iteration if it is still full.
  void flush_overflow(Reactor* target);
  void run();
  void drain_mailbox();
  // The stamp a post carries: its time for one post in kWaitSampleEvery, else 0.
  static int64_t wait_stamp();
  void run_deferred();
  // Any thread: makes the loop run drain_mailbox soon; one eventfd write
  // while a wake-up is pending, none after.
  void wake();
  static void on_wakeup(uv_poll_t* h, int status, int events);
  static void on_prepare(uv_prepare_t* h);
  static void on_iteration(uv_prepare_t* h);

  const size_t index_;
  const std::string name_;
  uv_loop_t loop_{};
  // The loop's wake-up: an eventfd the loop polls. Not libuv's uv_async_t,
  // whose loop side spins (and then calls sched_yield) until the waking
  // thread has returned from its write: a poster preempted inside that
  // write held the woken reactor for tens of microseconds to milliseconds.
  int wakeup_fd_ = -1;
  uv_poll_t wakeup_{};
  std::atomic<bool> wakeup_pending_{false};  // written and not yet read by the loop
  uv_prepare_t prepare_{};
  uv_prepare_t iteration_{};  // always on, before every poll: measures the iteration
  uint64_t iteration_at_ns_ = 0;  // uv_hrtime() and the loop's idle time at the last poll
  uint64_t iteration_idle_ns_ = 0;
  // The thread's CPU time, read at uv_hrtime() `cpu_read_at_ns_`: the CPU
  // clock is a system call (no vDSO), so it is read at most once per
  // kCpuReadEvery and after a slow iteration, not on every iteration.
  int64_t cpu_ns_ = 0;
  uint64_t cpu_read_at_ns_ = 0;
  LoopStats stats_;
  Mailbox mailbox_;
  std::vector<Task> deferred_;
  std::vector<Task> deferred_running_;
  // Tasks this reactor sent with post_reliably that found the target's
  // mailbox full, by target. Touched only on this reactor.
  std::unordered_map<Reactor*, std::deque<Task>> overflow_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> posters_{0};
  std::atomic<bool> running_{false};
  std::atomic<int64_t> last_lag_ns_{0};
  std::atomic<int64_t> probe_posted_ns_{0};  // steady clock; 0 when no probe is outstanding
};

}  // namespace magnetar::runtime
