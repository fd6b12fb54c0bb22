#include "runtime/reactor.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>

#include "common/logging.h"
#include "common/stage_timing.h"

namespace magnetar::runtime {

using common::Status;

namespace {

thread_local Reactor* t_current = nullptr;

}  // namespace

Reactor::Reactor(size_t index, std::string name, size_t mailbox_capacity)
    : index_(index), name_(std::move(name)), mailbox_(mailbox_capacity) {}

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
  loop_.data = this;
  uv_async_init(&loop_, &wakeup_, &Reactor::on_async);
  wakeup_.data = this;
  uv_prepare_init(&loop_, &prepare_);
  prepare_.data = this;
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
// is between its stopping_ check and its uv_async_send (which must never
// touch a closed handle).
Reactor::PushResult Reactor::push(Task& task) {
  posters_.fetch_add(1);
  PushResult r = PushResult::kPushed;
  if (stopping_.load()) {
    r = PushResult::kStopping;
  } else if (!mailbox_.try_push(task)) {
    r = PushResult::kFull;
  } else {
    // uv_async_send first reads the handle's pending flag and sends nothing
    // when it is set. Without a full fence that read can pass the store that
    // published the task (x86 reorders a store with a later load), see a
    // flag the loop has just cleared, and leave the task asleep in the
    // mailbox until something else wakes the loop: a lost wakeup.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    uv_async_send(&wakeup_);
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

void Reactor::on_async(uv_async_t* h) { static_cast<Reactor*>(h->data)->drain_mailbox(); }

void Reactor::drain_mailbox() {
  Task task;
  size_t n = 0;
  while (n < kMaxTasksPerWakeup && mailbox_.try_pop(task)) {
    task();
    task.reset();
    ++n;
  }
  // More queued: come back after this iteration's I/O instead of starving it.
  if (n == kMaxTasksPerWakeup && !stopping_.load()) uv_async_send(&wakeup_);
}

void Reactor::on_prepare(uv_prepare_t* h) { static_cast<Reactor*>(h->data)->run_deferred(); }

void Reactor::run_deferred() {
  // Tasks deferred while running deferred tasks run in the same pass, bounded
  // so that a task that keeps deferring itself cannot stall the loop.
  for (int round = 0; round < 8 && !deferred_.empty(); ++round) {
    deferred_running_.swap(deferred_);
    for (auto& t : deferred_running_) t();
    deferred_running_.clear();
  }
  if (deferred_.empty()) {
    uv_prepare_stop(&prepare_);
  } else {
    uv_async_send(&wakeup_);  // still work to do: do not sleep in poll
  }
}

}  // namespace magnetar::runtime
