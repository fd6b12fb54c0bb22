#include "metadata/watchers.h"

#include "runtime/reactor.h"

namespace magnetar::metadata {

void deliver(runtime::Reactor* home, std::function<void()> fn) {
  if (home == nullptr) {
    fn();
    return;
  }
  home->post_or_wait(runtime::Task(std::move(fn)));
}

common::Result<WatchId> Watchers::watch(std::string prefix, WatchCallback fn) {
  if (prefix.empty() || prefix.front() != '/') {
    return common::Status::invalid_argument("watch prefix '" + prefix + "' must start with '/'");
  }
  std::lock_guard lock(mu_);
  WatchId id = next_++;
  watchers_[id] = Watcher{std::move(prefix), std::move(fn), runtime::Reactor::current()};
  return id;
}

void Watchers::unwatch(WatchId id) {
  std::lock_guard lock(mu_);
  watchers_.erase(id);
}

void Watchers::notify(const std::vector<Event>& events) {
  if (events.empty()) return;
  // Matched under the lock, delivered outside it: a callback run here may
  // watch or unwatch.
  std::vector<std::pair<Watcher, Event>> due;
  {
    std::lock_guard lock(mu_);
    for (const auto& e : events) {
      for (const auto& [id, w] : watchers_) {
        if (e.key.compare(0, w.prefix.size(), w.prefix) == 0) due.emplace_back(w, e);
      }
    }
  }
  for (auto& [w, e] : due) {
    deliver(w.home, [fn = w.fn, e = e]() { fn(e); });
  }
}

}  // namespace magnetar::metadata
