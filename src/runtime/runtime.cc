#include "runtime/runtime.h"

#include <string>
#include <thread>

namespace magnetar::runtime {

Runtime::Runtime(size_t reactors, size_t mailbox_capacity) {
  if (reactors == 0) reactors = std::max(1u, std::thread::hardware_concurrency());
  reactors_.reserve(reactors);
  for (size_t i = 0; i < reactors; ++i) {
    reactors_.push_back(std::make_unique<Reactor>(i, "reactor-" + std::to_string(i), mailbox_capacity));
  }
}

Runtime::~Runtime() { stop(); }

void Runtime::start() {
  for (auto& r : reactors_) r->start();
  started_ = true;
}

void Runtime::stop() {
  if (!started_) return;
  started_ = false;
  for (auto it = reactors_.rbegin(); it != reactors_.rend(); ++it) (*it)->stop();
}

Reactor& Runtime::next() {
  return *reactors_[next_.fetch_add(1, std::memory_order_relaxed) % reactors_.size()];
}

}  // namespace magnetar::runtime
