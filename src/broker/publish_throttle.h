// PublishThrottle: holds one connection's input while a publish limit it
// charged is over, as Pulsar throttles a producing connection: the
// protocol handler stops decoding and stops reading, the client's bytes wait
// in the kernel and TCP pushes back on the client. Nothing is refused,
// nothing is dropped; the connection goes on where it stopped once the
// limit's debt is paid.
//
// Threads: created, used and destroyed on the connection's reactor.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "broker/publish_limiter.h"
#include "runtime/reactor.h"
#include "runtime/timer.h"

namespace magnetar::broker {

class PublishThrottle {
 public:
  // `resume` runs on the reactor when a hold ends: the handler reads again
  // (unless it holds the connection for reasons of its own) and decodes
  // the input it left.
  PublishThrottle(runtime::Reactor& reactor, std::function<void()> resume)
      : reactor_(reactor), resume_(std::move(resume)) {}

  // Charges one publish to `limits`. When a limit is over, starts (or
  // lengthens) a hold and answers true: the caller stops reading and
  // decoding until `resume` runs.
  bool charge(PublishLimits& limits, int64_t messages, int64_t bytes) {
    int64_t wait_ns = limits.charge(messages, bytes);
    if (wait_ns <= 0) return false;
    hold(wait_ns);
    return true;
  }
  // Starts (or lengthens) a hold of `wait_ns` from now, for a charge made
  // elsewhere (on the topic's home reactor).
  void hold(int64_t wait_ns);
  // True while a hold lasts.
  bool holding() const { return holding_; }
  // How long the current hold lasts from now, rounded up (0: none).
  std::chrono::milliseconds remaining() const;
  // Holds cancelled, `resume` is not called (the connection is closing).
  void cancel();

 private:
  void release();

  runtime::Reactor& reactor_;
  std::function<void()> resume_;
  std::unique_ptr<runtime::Timer> timer_;
  bool holding_ = false;
  bool releasing_ = false;  // inside release()
  int64_t until_ns_ = 0;  // limiter_now_ns() at which the hold ends
};

}  // namespace magnetar::broker
