#include "broker/delayed_delivery.h"

#include <algorithm>

namespace magnetar::broker {

using ledger::Position;

void DelayedDeliveryIndex::add(Position p, int64_t deliver_at_ms, uint32_t slot) {
  if (!by_position_.emplace(p, Held{deliver_at_ms, slot}).second) return;
  by_time_.emplace(deliver_at_ms, p);
}

std::vector<DelayedDeliveryIndex::Due> DelayedDeliveryIndex::take_due(int64_t now_ms) {
  std::vector<Due> out;
  auto it = by_time_.begin();
  while (it != by_time_.end() && it->first <= now_ms) {
    auto held = by_position_.find(it->second);
    out.push_back(Due{it->second, held->second.slot});
    by_position_.erase(held);
    it = by_time_.erase(it);
  }
  std::sort(out.begin(), out.end(), [](const Due& a, const Due& b) { return a.position < b.position; });
  return out;
}

std::optional<int64_t> DelayedDeliveryIndex::next_deliver_at() const {
  if (by_time_.empty()) return std::nullopt;
  return by_time_.begin()->first;
}

void DelayedDeliveryIndex::erase(Position p) {
  auto it = by_position_.find(p);
  if (it == by_position_.end()) return;
  by_time_.erase({it->second.deliver_at_ms, p});
  by_position_.erase(it);
}

void DelayedDeliveryIndex::erase_through(Position p) {
  auto end = by_position_.upper_bound(p);
  for (auto it = by_position_.begin(); it != end; ++it) by_time_.erase({it->second.deliver_at_ms, it->first});
  by_position_.erase(by_position_.begin(), end);
}

void DelayedDeliveryIndex::clear() {
  by_position_.clear();
  by_time_.clear();
}

}  // namespace magnetar::broker
