// DelayedDeliveryIndex: the entries a Shared or Key_Shared subscription
// holds back until their deliver-at time (Pulsar's deliverAt /
// deliverAfter), by time and by position.
//
// The index lives in memory only. It needs no persistence: a held entry is
// in the log and unacknowledged, so after a restart the dispatcher, reading
// again from the mark-delete position, meets it again and indexes it again
// (or delivers it at once if its time has passed meanwhile).
//
// Not thread-safe: owned by its Subscription on the topic's home reactor.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "ledger/position.h"

namespace magnetar::broker {

class DelayedDeliveryIndex {
 public:
  struct Due {
    ledger::Position position;
    uint32_t slot;  // Key_Shared hash slot of the entry's key (0 otherwise)
  };

  // Holds `p` until `deliver_at_ms`. Adding a position twice keeps the first.
  void add(ledger::Position p, int64_t deliver_at_ms, uint32_t slot);
  bool contains(ledger::Position p) const { return by_position_.count(p) > 0; }
  // Removes and returns every entry due at `now_ms`, in position order.
  std::vector<Due> take_due(int64_t now_ms);
  // The earliest deliver-at time held, if any.
  std::optional<int64_t> next_deliver_at() const;
  // Forgets `p` (acknowledged), or everything at or before `p`.
  void erase(ledger::Position p);
  void erase_through(ledger::Position p);
  void clear();
  size_t size() const { return by_position_.size(); }

 private:
  struct Held {
    int64_t deliver_at_ms;
    uint32_t slot;
  };
  std::map<ledger::Position, Held> by_position_;
  std::set<std::pair<int64_t, ledger::Position>> by_time_;
};

}  // namespace magnetar::broker
