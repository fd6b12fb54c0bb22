// Polls `done` until it holds or `limit` passes: for unit tests of parts
// that answer on their own threads (watches, caches). Returns whether it
// held; a test asserts on that, never on how long it took.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace magnetar::test_util {

inline bool eventually(const std::function<bool()>& done,
                       std::chrono::milliseconds limit = std::chrono::seconds(10),
                       std::chrono::milliseconds every = std::chrono::milliseconds(1)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(every);
  }
  return done();
}

}  // namespace magnetar::test_util
