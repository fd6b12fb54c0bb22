// Fifo: a first-in first-out queue that costs no heap memory while empty.
//
// For queues that are almost always empty but live in every topic (adds
// held during a rollover, publishes held by a quota, producers waiting for
// exclusive access): std::deque allocates a map and a 512-byte block as
// soon as it is constructed, which 100,000 idle topics pay for nothing.
// Items live in one vector; popping advances a head index and the vector is
// compacted once the popped prefix is half of it, and released when empty.
//
// Not thread-safe.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace magnetar::common {

template <typename T>
class Fifo {
 public:
  bool empty() const { return head_ == items_.size(); }
  size_t size() const { return items_.size() - head_; }
  // REQUIRES: !empty().
  T& front() { return items_[head_]; }
  const T& front() const { return items_[head_]; }
  T& back() { return items_.back(); }
  void push_back(T item) { items_.push_back(std::move(item)); }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    return items_.emplace_back(std::forward<Args>(args)...);
  }
  // REQUIRES: !empty().
  void pop_front() {
    items_[head_] = T();
    ++head_;
    if (head_ == items_.size()) {
      clear();
    } else if (head_ >= 32 && head_ * 2 >= items_.size()) {
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }
  // Removes every item and gives the memory back.
  void clear() {
    std::vector<T>().swap(items_);
    head_ = 0;
  }
  void swap(Fifo& o) noexcept {
    items_.swap(o.items_);
    std::swap(head_, o.head_);
  }

  auto begin() { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  auto end() { return items_.end(); }
  auto begin() const { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  auto end() const { return items_.end(); }

 private:
  std::vector<T> items_;
  size_t head_ = 0;
};

}  // namespace magnetar::common
