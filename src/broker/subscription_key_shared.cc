// Key_Shared dispatch: the part of Subscription that hands entries to the
// consumer owning their key's hash slot (subscription.h has the rules).
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "broker/subscription.h"
#include "common/clock.h"
#include "common/logging.h"

namespace magnetar::broker {

using common::Result;
using ledger::LedgerEntry;
using ledger::Position;

Consumer* Subscription::owner_of(uint32_t slot) {
  if (!selector_) return nullptr;
  auto id = selector_->select(slot);
  return id ? consumer(*id) : nullptr;
}

bool Subscription::slot_pending_elsewhere(uint32_t slot, const Consumer* c) const {
  for (const auto& other : consumers_) {
    if (other.get() != c && other->pending_slots_.count(slot) > 0) return true;
  }
  return false;
}

// Walks what waits (entries held in memory and entries to read again) in
// log order. An entry goes to its slot's owner when the owner can take it,
// no other consumer still holds an entry of that slot, and no earlier entry
// of that slot waits; otherwise its slot is closed for the rest of the walk,
// which keeps every key in order. The walk stops once it handed out
// `allowance` messages (the dispatch rate's tokens). Then reads one entry
// to send again, or new entries while fewer than kMaxHeldEntries wait.
void Subscription::dispatch_key_shared(int64_t allowance) {
  bool any_room = std::any_of(consumers_.begin(), consumers_.end(), [this](const auto& c) { return can_take(*c); });
  if (!any_room) return;
  std::unordered_set<uint32_t> closed_slots;
  std::optional<Position> to_read;
  std::vector<std::pair<Consumer*, std::vector<LedgerEntry>>> out;
  std::unordered_map<const Consumer*, uint64_t> room;  // unacked messages each may still take
  uint64_t sub_room = subscription_room();
  auto h = held_.begin();
  auto r = redeliver_.begin();
  bool spent = false;  // the allowance ran out with entries still waiting
  while (h != held_.end() || r != redeliver_.end()) {
    if (h == held_.end() || (r != redeliver_.end() && r->first < h->first)) {
      closed_slots.insert(r->second);
      if (!to_read) to_read = r->first;
      ++r;
      continue;
    }
    if (allowance <= 0) {
      spent = true;
      break;
    }
    uint32_t slot = h->second.slot;
    if (closed_slots.count(slot) > 0) {
      ++h;
      continue;
    }
    Consumer* c = owner_of(slot);
    if (c != nullptr && room.count(c) == 0) room[c] = consumer_room(*c);
    if (c == nullptr || !can_take(*c) || room[c] == 0 || sub_room == 0 ||
        (!c->options().allow_out_of_order && slot_pending_elsewhere(slot, c))) {
      closed_slots.insert(slot);
      ++h;
      continue;
    }
    uint32_t messages = unacked_messages_of(h->second.entry);
    allowance -= h->second.entry.header.messages;
    charge(*c, h->second.entry, messages);
    room[c] -= std::min<uint64_t>(room[c], messages);
    if (sub_room != UINT64_MAX) sub_room -= std::min<uint64_t>(sub_room, messages);
    auto batch = std::find_if(out.begin(), out.end(), [c](const auto& b) { return b.first == c; });
    if (batch == out.end()) batch = out.insert(out.end(), {c, {}});
    batch->second.push_back(std::move(h->second.entry));
    h = held_.erase(h);
  }
  for (auto& [c, batch] : out) deliver(*c, batch);
  if (spent || allowance <= 0) {
    schedule_dispatch();  // waits for the next token (dispatch_allowance arms the timer)
    return;
  }

  std::weak_ptr<bool> alive = liveness();
  if (to_read) {
    Position wanted = *to_read;
    reading_ = true;
    log_.read_entries(before(wanted), 1, [this, alive, wanted, gen = generation_](Result<std::vector<LedgerEntry>> r) {
      if (alive.expired() || gen != generation_) return;
      on_key_shared_read(std::move(r), /*redelivery=*/true, wanted);
    });
    return;
  }
  if (held_.size() >= kMaxHeldEntries) return;
  int64_t permits = total_permits();
  if (permits <= 0) return;
  size_t n = static_cast<size_t>(std::min<int64_t>(
      {permits, static_cast<int64_t>(kMaxReadEntries), static_cast<int64_t>(kMaxHeldEntries - held_.size()),
       allowance}));
  n = std::min(n, credit_entries(nullptr));
  reading_ = true;
  log_.read_entries(read_position_, n, [this, alive, gen = generation_](Result<std::vector<LedgerEntry>> r) {
    if (alive.expired() || gen != generation_) return;
    on_key_shared_read(std::move(r), /*redelivery=*/false, Position{});
  });
}

void Subscription::on_key_shared_read(Result<std::vector<LedgerEntry>> result, bool redelivery, Position wanted) {
  reading_ = false;
  if (redelivery) {
    redeliver_.erase(wanted);
    if (result.is_ok() && !result->empty() && result->front().position == wanted &&
        !cursor_.is_acknowledged(wanted)) {
      LedgerEntry& e = result->front();
      uint32_t slot = slot_of(e.header);
      held_.emplace(wanted, Held{std::move(e), slot});
    } else if (!result.is_ok()) {
      MLOG_WARN("subscription {}: cannot reread {} for redelivery: {}", name(), wanted.to_string(),
                result.status().to_string());
    }
    schedule_dispatch();
    return;
  }
  if (!take_read(result)) return;
  int64_t now = common::wall_clock_ms();
  for (auto& e : *result) {
    if (cursor_.is_acknowledged(e.position) || known(e.position)) continue;
    uint32_t slot = slot_of(e.header);
    if (e.header.deliver_at_ms > now) {
      hold_back(e.position, e.header.deliver_at_ms, slot);
      continue;
    }
    Position p = e.position;
    held_.emplace(p, Held{std::move(e), slot});
  }
  schedule_dispatch();
}

}  // namespace magnetar::broker
