// Timer: a one-shot or repeating callback on the reactor that created it.
//
// REQUIRES: created, used and destroyed on that reactor's thread. Destroying
// a Timer cancels it; the callback never runs after the destructor returns.
// The callback may re-arm its own timer or destroy it while it runs.
#pragma once

#include <uv.h>

#include <chrono>

#include "runtime/reactor.h"
#include "runtime/task.h"

namespace magnetar::runtime {

class Timer {
 public:
  explicit Timer(Reactor& reactor);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Runs `fn` once after `delay`. Replaces any pending schedule.
  void once(std::chrono::milliseconds delay, Task fn);
  // Runs `fn` every `period`, first after one period.
  void every(std::chrono::milliseconds period, Task fn);
  void cancel();
  bool active() const;

 private:
  struct Handle {
    uv_timer_t timer;
    Task fn;
    Reactor* reactor;
  };
  static void on_fire(uv_timer_t* t);

  Reactor& reactor_;
  Handle* handle_;  // freed by libuv's close callback, after the destructor
};

}  // namespace magnetar::runtime
