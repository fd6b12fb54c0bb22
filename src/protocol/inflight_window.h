// InflightWindow: the work one client connection has started and not yet
// answered, counted as requests and their bytes, with a high mark where the
// connection stops taking more and a low mark (half of it) where it takes
// more again.
//
// It is the bound behind every protocol's back-pressure: while the window is
// closed the connection decodes nothing more and stops reading its socket, so
// a client that sends faster than its requests are answered is held back by
// TCP instead of growing the node's memory. The gap between the marks keeps
// a connection at the bound from pausing and resuming its socket on every
// answer.
//
// Threads: one connection's; no locks, no allocation.
#pragma once

#include <cstddef>

namespace magnetar::protocol {

class InflightWindow {
 public:
  // REQUIRES: max_count >= 1 and max_bytes >= 1. A request larger than
  // max_bytes is still taken when the window is open: it closes it.
  InflightWindow(size_t max_count, size_t max_bytes) : max_count_(max_count), max_bytes_(max_bytes) {}

  // One request of `bytes` started. True when this closed the window.
  bool add(size_t bytes) {
    ++count_;
    bytes_ += bytes;
    if (!open_ || (count_ < max_count_ && bytes_ < max_bytes_)) return false;
    open_ = false;
    return true;
  }

  // A request already counted turned out to hold `bytes` more (its answer
  // is larger than it was counted for). True when this closed the window.
  // REQUIRES: the request's remove() gives back these bytes too.
  bool add_bytes(size_t bytes) {
    bytes_ += bytes;
    if (!open_ || bytes_ < max_bytes_) return false;
    open_ = false;
    return true;
  }

  // One request of `bytes` (as given to add, with what add_bytes added
  // for it) was answered. True when this reopened the window: both the
  // count and the bytes are at half their bound or below.
  bool remove(size_t bytes) {
    --count_;
    bytes_ -= bytes;
    if (open_ || count_ > max_count_ / 2 || bytes_ > max_bytes_ / 2) return false;
    open_ = true;
    return true;
  }

  bool open() const { return open_; }
  size_t count() const { return count_; }
  size_t bytes() const { return bytes_; }
  size_t max_count() const { return max_count_; }
  size_t max_bytes() const { return max_bytes_; }

 private:
  size_t max_count_;
  size_t max_bytes_;
  size_t count_ = 0;
  size_t bytes_ = 0;
  bool open_ = true;
};

}  // namespace magnetar::protocol
