#include "runtime/reactor.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "common/logging.h"
#include "common/stage_timing.h"

namespace magnetar::runtime {

using common::Status;

namespace {

thread_local Reactor* t_current = nullptr;

}  // namespace

Reactor::Reactor(size_t index, std::string name, size_t mailbox_capacity)
    : index_(index), name_(std::move(name)), stats_(index, name_), mailbox_(mailbox_capacity) {}

Reactor::~Reactor() { stop(); }

Reactor* Reactor::current() { return t_current; }

void Reactor::assert_on_thread() const {
  if (!is_on_thread()) {
    MLOG_ERROR("called off the owning thread of {}", name_);
    std::abort();
  }
}

void Reactor::die_stopped() const {
  MLOG_ERROR("run_sync on {} after it stopped", name_);
  std::abort();
}

void Reactor::start() {
  assert(!running_.load());
  uv_loop_init(&loop_);
  // Time blocked in poll, so that an iteration's own running time is known
  // (one more epoll_wait, with no timeout, before the loop sleeps).
  uv_loop_configure(&loop_, UV_METRICS_IDLE_TIME);
  loop_.data = this;
  wakeup_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wakeup_fd_ < 0) {
    MLOG_ERROR("{}: cannot make its wake-up eventfd: {}", name_, std::strerror(errno));
    std::abort();
  }
  uv_poll_init(&loop_, &wakeup_, wakeup_fd_);
  wakeup_.data = this;
  uv_poll_start(&wakeup_, UV_READABLE, &Reactor::on_wakeup);
  uv_prepare_init(&loop_, &prepare_);
  prepare_.data = this;
  uv_prepare_init(&loop_, &iteration_);
  iteration_.data = this;
  uv_prepare_start(&iteration_, &Reactor::on_iteration);
  uv_unref(reinterpret_cast<uv_handle_t*>(&iteration_));  // measures the loop, does not keep it alive
  running_.store(true);
  std::promise<void> ready;
  auto ready_fut = ready.get_future();
  thread_ = std::thread([this, &ready]() {
    t_current = this;
    common::set_thread_name(name_);
    ready.set_value();
    run();
    t_current = nullptr;
  });
  ready_fut.wait();
}

void Reactor::run() {
  uv_run(&loop_, UV_RUN_DEFAULT);
  // Whatever is left after every handle closed (close callbacks) finishes here.
  uv_run(&loop_, UV_RUN_NOWAIT);
  uv_loop_close(&loop_);
  // No poster is left (stop() waited for them before the loop closed).
  ::close(wakeup_fd_);
  wakeup_fd_ = -1;
}

void Reactor::stop() {
  if (!running_.exchange(false)) return;
  assert(!is_on_thread());
  // The close task is the last thing this reactor accepts.
  post_or_wait([this]() {
    stopping_.store(true);
    // Posters that saw stopping_ == false finish their push before we drain.
    while (posters_.load() > 0) std::this_thread::yield();
    Task task;
    while (mailbox_.try_pop(task)) {
      task();
      task.reset();
    }
    uv_walk(&loop_, [](uv_handle_t* h, void*) {
      if (!uv_is_closing(h)) uv_close(h, nullptr);
    }, nullptr);
  });
  thread_.join();
}

// Every push is bracketed by posters_ so that stop() can wait until no thread
// is between its stopping_ check and its wake() (which must never write to a
// closed eventfd).
Reactor::PushResult Reactor::push(Task& task) {
  posters_.fetch_add(1);
  PushResult r = PushResult::kPushed;
  if (stopping_.load()) {
    r = PushResult::kStopping;
  } else if (!mailbox_.try_push(task, wait_stamp())) {
    r = PushResult::kFull;
  } else {
    // wake() first reads wakeup_pending_ and writes nothing when it is set.
    // Without a full fence that read can pass the store that published the
    // task (x86 reorders a store with a later load), see a flag the loop has
    // just cleared, and leave the task asleep in the mailbox until something
    // else wakes the loop: a lost wakeup.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    wake();
  }
  posters_.fetch_sub(1);
  return r;
}

bool Reactor::post_reliably(Task task) {
  Reactor* here = current();
  if (here == nullptr) return post_or_wait(std::move(task));
  if (stopping_.load()) return false;
  // Behind tasks already waiting for room, so that one sender's tasks keep
  // their order.
  auto& waiting = here->overflow_[this];
  if (waiting.empty()) {
    switch (push(task)) {
      case PushResult::kPushed: return true;
      case PushResult::kStopping: return false;
      case PushResult::kFull: break;
    }
  }
  waiting.push_back(std::move(task));
  if (waiting.size() == 1) here->defer([this, here]() { here->flush_overflow(this); });
  return true;
}

void Reactor::flush_overflow(Reactor* target) {
  auto it = overflow_.find(target);
  if (it == overflow_.end()) return;
  auto& waiting = it->second;
  while (!waiting.empty()) {
    PushResult r = target->push(waiting.front());
    if (r == PushResult::kFull) {
      defer([this, target]() { flush_overflow(target); });
      return;
    }
    waiting.pop_front();  // pushed, or dropped because the target is stopping
  }
  overflow_.erase(it);
}

common::Status Reactor::post(Task task) { return try_post(task); }

common::Status Reactor::try_post(Task& task) {
  switch (push(task)) {
    case PushResult::kPushed: return common::Status::ok();
    case PushResult::kStopping: return common::Status::unavailable(name_ + " is stopping");
    case PushResult::kFull: break;
  }
  return common::Status::resource_exhausted(name_ + " mailbox is full (" +
                                            std::to_string(mailbox_.capacity()) + " tasks)");
}

bool Reactor::post_or_wait(Task task) {
  for (int spins = 0;; ++spins) {
    switch (push(task)) {
      case PushResult::kPushed: return true;
      case PushResult::kStopping: return false;
      case PushResult::kFull: break;
    }
    if (spins < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}


void Reactor::probe_lag() {
  int64_t expected = 0;
  int64_t now = common::monotonic_ns();
  if (!probe_posted_ns_.compare_exchange_strong(expected, now)) return;
  Status st = post([this, now]() {
    last_lag_ns_.store(common::monotonic_ns() - now);
    probe_posted_ns_.store(0);
  });
  if (!st.is_ok()) probe_posted_ns_.store(0);
}

std::chrono::nanoseconds Reactor::loop_lag() const {
  int64_t lag = last_lag_ns_.load();
  int64_t posted = probe_posted_ns_.load();
  if (posted != 0) lag = std::max(lag, common::monotonic_ns() - posted);
  return std::chrono::nanoseconds(lag);
}

void Reactor::defer(Task task) {
  assert(is_on_thread());
  if (deferred_.empty()) uv_prepare_start(&prepare_, &Reactor::on_prepare);
  deferred_.push_back(std::move(task));
}

void Reactor::wake() {
  if (wakeup_pending_.exchange(true)) return;  // the loop has a write to read still
  const uint64_t one = 1;
  while (::write(wakeup_fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

void Reactor::on_wakeup(uv_poll_t* h, int status, int events) {
  auto* r = static_cast<Reactor*>(h->data);
  if (status < 0 || (events & UV_READABLE) == 0) return;
  uint64_t count = 0;
  while (::read(r->wakeup_fd_, &count, sizeof(count)) < 0 && errno == EINTR) {
  }
  // Cleared before the mailbox is read, with a full fence (the poster's
  // pairs with it): a task pushed after the drain below looked is posted by
  // a thread that then sees the flag clear and writes again.
  r->wakeup_pending_.store(false);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  r->drain_mailbox();
}

int64_t Reactor::wait_stamp() {
  // A sample of the posts carries its time: reading the clock for every
  // post and every task cost the mailbox three quarters of its throughput.
  thread_local uint32_t posts = 0;
  return (++posts & (kWaitSampleEvery - 1)) == 0 ? common::monotonic_ns() : 0;
}

void Reactor::drain_mailbox() {
  Task task;
  int64_t posted_ns = 0;
  // Per task only the coarse clock: a slow task is tens of milliseconds.
  int64_t start = common::monotonic_coarse_ns();
  size_t n = 0;
  while (n < kMaxTasksPerWakeup && mailbox_.try_pop(task, &posted_ns)) {
    if (posted_ns != 0) stats_.task_waited(posted_ns, common::monotonic_ns());
    task();
    const std::type_info& type = task.type();
    task.reset();
    const int64_t end = common::monotonic_coarse_ns();
    stats_.callback_ran("a task", type, start, end);
    start = end;
    ++n;
  }
  // More queued: come back after this iteration's I/O instead of starving it.
  if (n == kMaxTasksPerWakeup && !stopping_.load()) wake();
}

void Reactor::on_prepare(uv_prepare_t* h) { static_cast<Reactor*>(h->data)->run_deferred(); }

namespace {

int64_t thread_cpu_ns() {
  timespec cpu{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
  return static_cast<int64_t>(cpu.tv_sec) * 1'000'000'000 + cpu.tv_nsec;
}

// How stale the CPU time may be: a slow iteration (20 ms by default) is
// reported with the CPU time of at most this much more than itself.
constexpr uint64_t kCpuReadEvery = 1'000'000;

}  // namespace

void Reactor::on_iteration(uv_prepare_t* h) {
  auto* r = static_cast<Reactor*>(h->data);
  const uint64_t now = uv_hrtime();
  const uint64_t idle = uv_metrics_idle_time(&r->loop_);
  if (r->iteration_at_ns_ != 0) {
    const uint64_t elapsed = now - r->iteration_at_ns_;
    const uint64_t slept = idle - r->iteration_idle_ns_;
    const int64_t busy = elapsed > slept ? static_cast<int64_t>(elapsed - slept) : 0;
    int64_t cpu = 0;
    if (r->stats_.slow_iteration(busy)) {
      const int64_t cpu_now = thread_cpu_ns();
      cpu = cpu_now - r->cpu_ns_;
      r->cpu_ns_ = cpu_now;
      r->cpu_read_at_ns_ = now;
    }
    r->stats_.iteration_ran(busy, cpu, common::monotonic_ns());
  }
  if (now - r->cpu_read_at_ns_ >= kCpuReadEvery) {
    r->cpu_ns_ = thread_cpu_ns();
    r->cpu_read_at_ns_ = now;
  }
  r->iteration_at_ns_ = now;
  r->iteration_idle_ns_ = idle;
}

void Reactor::run_deferred() {
  // Tasks deferred while running deferred tasks run in the same pass, bounded
  // so that a task that keeps deferring itself cannot stall the loop.
  for (int round = 0; round < 8 && !deferred_.empty(); ++round) {
    deferred_running_.swap(deferred_);
    int64_t start = common::monotonic_ns();
    for (auto& t : deferred_running_) {
      t();
      const int64_t end = common::monotonic_ns();
      stats_.callback_ran("a deferred task", t.type(), start, end);
      start = end;
    }
    deferred_running_.clear();
  }
  if (deferred_.empty()) {
    uv_prepare_stop(&prepare_);
  } else {
    wake();  // still work to do: do not sleep in poll
  }
}

}  // namespace magnetar::runtime
