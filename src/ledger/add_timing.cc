#include "ledger/add_timing.h"

namespace magnetar::ledger {
namespace {
thread_local const AddTiming* current = nullptr;
}  // namespace

const AddTiming* current_add_timing() { return current; }

ScopedAddTiming::ScopedAddTiming(const AddTiming* timing) : previous_(current) { current = timing; }
ScopedAddTiming::~ScopedAddTiming() { current = previous_; }

}  // namespace magnetar::ledger
