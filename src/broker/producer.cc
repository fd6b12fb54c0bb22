#include "broker/producer.h"

#include <algorithm>

namespace magnetar::broker {

std::string_view producer_access_mode_name(ProducerAccessMode m) {
  switch (m) {
    case ProducerAccessMode::kShared: return "Shared";
    case ProducerAccessMode::kExclusive: return "Exclusive";
    case ProducerAccessMode::kWaitForExclusive: return "WaitForExclusive";
    case ProducerAccessMode::kExclusiveWithFencing: return "ExclusiveWithFencing";
  }
  return "Shared";
}

ProducerAccess::Decision ProducerAccess::decide(ProducerAccessMode mode) const {
  switch (mode) {
    case ProducerAccessMode::kShared:
      return exclusive_ ? Decision::kRefuseBusy : Decision::kAdmit;
    case ProducerAccessMode::kExclusive:
      return modes_.empty() ? Decision::kAdmit : Decision::kRefuseFenced;
    case ProducerAccessMode::kWaitForExclusive:
      return modes_.empty() && waiting_.empty() ? Decision::kAdmit : Decision::kWait;
    case ProducerAccessMode::kExclusiveWithFencing:
      return modes_.empty() ? Decision::kAdmit : Decision::kAdmitAndFence;
  }
  return Decision::kAdmit;
}

void ProducerAccess::admitted(uint64_t id, ProducerAccessMode mode) {
  modes_[id] = mode;
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), id), waiting_.end());
  if (mode != ProducerAccessMode::kShared) {
    exclusive_ = id;
    ++epoch_;
  }
}

void ProducerAccess::removed(uint64_t id) {
  modes_.erase(id);
  if (exclusive_ == id) exclusive_.reset();
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), id), waiting_.end());
}

bool ProducerAccess::is_waiting(uint64_t id) const {
  return std::find(waiting_.begin(), waiting_.end(), id) != waiting_.end();
}

std::optional<uint64_t> ProducerAccess::next_waiting() const {
  if (!modes_.empty() || waiting_.empty()) return std::nullopt;
  return waiting_.front();
}

}  // namespace magnetar::broker
