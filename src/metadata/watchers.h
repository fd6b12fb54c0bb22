// Watchers: the watches registered on one store, and how their notifications
// reach the thread that asked for them.
//
// Threads: watch() and unwatch() from any thread; notify() from the one
// thread that applies the store's changes, in the order they were applied. A
// notification runs on the reactor that called watch(), or on the notifying
// thread itself when watch() was not called on a reactor.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/result.h"
#include "metadata/store.h"

namespace magnetar::runtime {
class Reactor;
}

namespace magnetar::metadata {

// Runs `fn` on `home`, or right here when home is null. A reactor that is
// stopping takes no more work: the answer has no one to go to then.
void deliver(runtime::Reactor* home, std::function<void()> fn);

class Watchers {
 public:
  // InvalidArgument unless `prefix` starts with '/'.
  common::Result<WatchId> watch(std::string prefix, WatchCallback fn);
  // After it returns, no new notification for `id` is queued.
  void unwatch(WatchId id);
  // Queues one notification per event and matching watch, events in order.
  void notify(const std::vector<Event>& events);

 private:
  struct Watcher {
    std::string prefix;
    WatchCallback fn;
    runtime::Reactor* home = nullptr;
  };

  std::mutex mu_;
  std::map<WatchId, Watcher> watchers_;
  WatchId next_ = 1;
};

}  // namespace magnetar::metadata
