#include "runtime/timer.h"

#include "common/stage_timing.h"

namespace magnetar::runtime {

Timer::Timer(Reactor& reactor) : reactor_(reactor), handle_(new Handle) {
  reactor_.assert_on_thread();
  uv_timer_init(reactor_.loop(), &handle_->timer);
  handle_->timer.data = handle_;
  handle_->reactor = &reactor_;
}

Timer::~Timer() {
  uv_timer_stop(&handle_->timer);
  handle_->fn.reset();
  uv_close(reinterpret_cast<uv_handle_t*>(&handle_->timer),
           [](uv_handle_t* h) { delete static_cast<Handle*>(h->data); });
}

void Timer::on_fire(uv_timer_t* t) {
  auto* h = static_cast<Handle*>(t->data);
  if (!h->fn) return;
  // Run from here, not from the handle: once() from inside the callback
  // replaces the handle's callable, and ~Timer resets it.
  Task fn = std::move(h->fn);
  const int64_t start = common::monotonic_ns();
  fn();
  h->reactor->loop_stats().callback_ran("a timer", fn.type(), start, common::monotonic_ns());
  const bool closing = uv_is_closing(reinterpret_cast<uv_handle_t*>(t)) != 0;
  if (!h->fn && !closing && uv_timer_get_repeat(t) != 0) h->fn = std::move(fn);
}

void Timer::once(std::chrono::milliseconds delay, Task fn) {
  handle_->fn = std::move(fn);
  uv_timer_start(&handle_->timer, &Timer::on_fire, static_cast<uint64_t>(delay.count()), 0);
}

void Timer::every(std::chrono::milliseconds period, Task fn) {
  handle_->fn = std::move(fn);
  auto ms = static_cast<uint64_t>(period.count());
  uv_timer_start(&handle_->timer, &Timer::on_fire, ms, ms);
}

void Timer::cancel() { uv_timer_stop(&handle_->timer); }

bool Timer::active() const {
  return uv_is_active(reinterpret_cast<const uv_handle_t*>(&handle_->timer)) != 0;
}

}  // namespace magnetar::runtime
