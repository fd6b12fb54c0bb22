// LeaseGate: a cluster member acknowledges publishes only while its lease is
// current (cluster/node.h).
//
// A member paused or cut off past its lease may wake with publishes in its
// sockets and store them on its own disk; their acknowledgements wait until
// the cluster has renewed its lease, so no client hears "stored" from a
// member the cluster had given up on. Acknowledgements keep their order:
// once one waits on a reactor, every later one on that reactor waits behind
// it (a topic's all complete on its home reactor). While acknowledgements
// wait, a timer on that reactor checks the lease every 20 ms; none runs
// otherwise. A standalone node has no gate.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "common/metrics.h"
#include "runtime/runtime.h"
#include "runtime/timer.h"

namespace magnetar::broker {

class LeaseGate {
 public:
  // `valid`: any thread, whether this member's lease is current now.
  LeaseGate(runtime::Runtime& runtime, std::function<bool()> valid);
  ~LeaseGate();
  LeaseGate(const LeaseGate&) = delete;
  LeaseGate& operator=(const LeaseGate&) = delete;

  // On a reactor of the runtime: runs `ack(true)` now when nothing waits on
  // this reactor and the lease is current, else once it is, after what
  // waits. After stop(), `ack(false)` at once (the member is stopping).
  void pass(std::function<void(bool acknowledged)> ack);
  // Before the reactors stop: every waiting `ack(false)`, and no timer left.
  void stop();

 private:
  struct PerReactor {
    std::deque<std::function<void(bool)>> waiting;
    std::unique_ptr<runtime::Timer> timer;
  };
  void drain(PerReactor& here);

  runtime::Runtime& runtime_;
  std::function<bool()> valid_;
  std::vector<PerReactor> reactors_;  // by reactor index; each touched only on its reactor
  std::atomic<bool> stopped_{false};
  common::Counter& held_;
};

}  // namespace magnetar::broker
