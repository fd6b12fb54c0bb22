// Component: a part of the server with a start and a stop.
//
// The server starts components in the order they were added and stops them
// in reverse, from the main thread (never from a reactor).
#pragma once

#include <string_view>

#include "common/status.h"

namespace magnetar::runtime {

class Component {
 public:
  virtual ~Component() = default;
  virtual std::string_view name() const = 0;
  // Blocking is allowed: runs on the main thread at start-up.
  virtual common::Status start() = 0;
  // Drains and releases what start() acquired. Idempotent.
  virtual void stop() = 0;
};

}  // namespace magnetar::runtime
