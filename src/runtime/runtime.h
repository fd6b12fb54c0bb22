// Runtime: the set of reactors a server runs on.
//
// Connections are spread over reactors round robin; a topic's home reactor is
// chosen by the hash of its name (home_for), so its state has one owner.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "runtime/reactor.h"

namespace magnetar::runtime {

class Runtime {
 public:
  // `reactors` == 0 means one per core.
  explicit Runtime(size_t reactors = 0, size_t mailbox_capacity = Reactor::kDefaultMailboxCapacity);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  void start();
  // Stops every reactor, last first. Idempotent.
  void stop();

  size_t size() const { return reactors_.size(); }
  Reactor& reactor(size_t i) { return *reactors_[i]; }
  // Any thread: the next reactor in round-robin order.
  Reactor& next();
  // The reactor that owns state keyed by `hash`.
  Reactor& home_for(uint64_t hash) { return *reactors_[hash % reactors_.size()]; }

  // How many connections each listener admits from one client address at a
  // time (0: no limit); one more is closed as soon as it is accepted.
  // REQUIRES: set before listeners start.
  void set_max_connections_per_address(uint32_t max) { max_connections_per_address_ = max; }
  uint32_t max_connections_per_address() const { return max_connections_per_address_; }

 private:
  std::vector<std::unique_ptr<Reactor>> reactors_;
  std::atomic<size_t> next_{0};
  uint32_t max_connections_per_address_ = 0;
  bool started_ = false;
};

}  // namespace magnetar::runtime
