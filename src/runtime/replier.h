// Reaching a handler that lives on one reactor (a protocol connection) from
// any thread, when it may have gone away meanwhile.
//
// The handler owns a shared HandlerLink pointing at itself and clears it when
// it closes; work for it holds only a weak_ptr. A Replier runs a function on
// the handler's reactor if the handler is still there, and drops it
// otherwise. Copyable; safe to outlive the handler.
#pragma once

#include <functional>
#include <memory>

#include "common/logging.h"
#include "runtime/reactor.h"

namespace magnetar::runtime {

// Read and written only on the handler's reactor; `conn` is null once the
// handler closed.
template <typename Handler>
struct HandlerLink {
  Handler* conn;
};

template <typename Handler>
class Replier {
 public:
  Replier(std::weak_ptr<HandlerLink<Handler>> link, Reactor& reactor) : link_(std::move(link)), reactor_(&reactor) {}

  // Runs `fn` at once on the handler's own reactor, else posts it there
  // without ever dropping it for a full mailbox (Reactor::post_reliably).
  void operator()(std::function<void(Handler&)> fn) const {
    auto task = [weak = link_, fn = std::move(fn)]() {
      auto link = weak.lock();
      if (link && link->conn != nullptr) fn(*link->conn);
    };
    if (reactor_->is_on_thread()) {
      task();
    } else if (!reactor_->post_reliably(std::move(task))) {
      MLOG_DEBUG("an answer was dropped: its connection's reactor is stopping");
    }
  }

 private:
  std::weak_ptr<HandlerLink<Handler>> link_;
  Reactor* reactor_;
};

}  // namespace magnetar::runtime
