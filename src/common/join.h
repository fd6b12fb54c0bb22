// Join: one answer for several asynchronous calls that report a Status.
//
//   auto join = common::Join::start(std::move(done));
//   for (auto& x : xs) x.op(join->branch());
//   join->release();
//
// `done` runs once, with the first error a branch reported (ok when none),
// after every branch has answered and release() was called, on the thread
// that made the last of those calls. A branch may answer before release()
// (inline or later); the opener's release() keeps `done` from running while
// branches are still being handed out. `ignore`, when given, turns the
// errors it accepts into ok (a NotFound while deleting, say).
//
// Not thread-safe: the branches answer on one thread (a reactor).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>

#include "common/status.h"

namespace magnetar::common {

class Join : public std::enable_shared_from_this<Join> {
 public:
  using Done = std::function<void(Status)>;
  using Ignore = std::function<bool(const Status&)>;

  static std::shared_ptr<Join> start(Done done, Ignore ignore = nullptr) {
    return std::shared_ptr<Join>(new Join(std::move(done), std::move(ignore)));
  }

  // The callback for one more call; call it exactly once.
  std::function<void(Status)> branch() {
    ++left_;
    return [self = shared_from_this()](Status st) { self->answer(std::move(st)); };
  }
  // The opener is done handing out branches. Call exactly once.
  void release() { answer(Status::ok()); }

 private:
  Join(Done done, Ignore ignore) : done_(std::move(done)), ignore_(std::move(ignore)) {}

  void answer(Status st) {
    if (!st.is_ok() && first_error_.is_ok() && !(ignore_ && ignore_(st))) first_error_ = std::move(st);
    if (--left_ > 0) return;
    Done done = std::move(done_);
    done(std::move(first_error_));
  }

  size_t left_ = 1;  // the opener's, until release()
  Status first_error_;
  Done done_;
  Ignore ignore_;
};

}  // namespace magnetar::common
