// AddTiming: where an add's time went inside the managed ledger and the
// storage, for whoever completes it (the publish stage histograms,
// broker/publish_stages.h).
//
// The managed ledger sets it for the duration of an add's callback, on the
// home reactor's thread; at any other time there is none. Code that needs
// the figures reads them in the callback itself, before it hands work on.
#pragma once

#include <cstdint>

namespace magnetar::ledger {

struct AddTiming {
  int64_t accepted_ns = 0;  // add_entry was called (common::monotonic_ns())
  int64_t sent_ns = 0;      // last handed to storage (after any wait for a rollover or a full queue)
  int64_t stored_ns = 0;    // storage's completion ran on the home reactor
};

// The timing of the add whose callback is running on this thread; null
// outside such a callback.
const AddTiming* current_add_timing();

// Makes `timing` current on this thread for its lifetime.
class ScopedAddTiming {
 public:
  explicit ScopedAddTiming(const AddTiming* timing);
  ~ScopedAddTiming();
  ScopedAddTiming(const ScopedAddTiming&) = delete;
  ScopedAddTiming& operator=(const ScopedAddTiming&) = delete;

 private:
  const AddTiming* previous_;
};

}  // namespace magnetar::ledger
