#include "storage/entry_cache.h"

#include <algorithm>

namespace magnetar::storage {

using common::Slice;

EntryCache::EntryCache(size_t capacity_bytes) : capacity_(capacity_bytes) {}

void EntryCache::account(Shard& s, size_t added, size_t removed) {
  s.bytes = s.bytes + added - removed;
  if (added > removed) {
    total_.fetch_add(added - removed, std::memory_order_relaxed);
  } else {
    total_.fetch_sub(removed - added, std::memory_order_relaxed);
  }
}

void EntryCache::insert(LedgerId ledger, EntryId entry, Slice data) {
  if (capacity_ == 0) return;
  Shard& s = shard(ledger);
  std::lock_guard lock(s.mu);
  Run& run = s.runs[ledger];
  EntryId end = run.first + static_cast<EntryId>(run.entries.size());
  if (!run.entries.empty() && entry >= run.first && entry < end) return;  // already held
  if (run.entries.empty() || entry != end) {
    size_t dropped = 0;
    for (const Slice& e : run.entries) dropped += e.size();
    account(s, 0, dropped);
    s.live -= run.entries.size();
    run.entries.clear();
    run.first = entry;
  }
  account(s, data.size(), 0);
  ++s.live;
  run.entries.push_back(std::move(data));
  s.order.emplace_back(ledger, entry);
  evict(s);
}

void EntryCache::evict(Shard& s) {
  // One budget for all shards: a busy ledger may use what idle ones do not.
  // Each shard evicts its own oldest entries while the total is over, so the
  // total passes the budget only by what other shards held before it filled.
  while (total_.load(std::memory_order_relaxed) > capacity_ && !s.order.empty()) {
    auto [ledger, entry] = s.order.front();
    s.order.pop_front();
    auto it = s.runs.find(ledger);
    if (it == s.runs.end() || it->second.entries.empty() || it->second.first != entry) continue;  // stale
    Run& run = it->second;
    account(s, 0, run.entries.front().size());
    --s.live;
    run.entries.pop_front();
    ++run.first;
    if (run.entries.empty()) s.runs.erase(it);
  }
  // Stale order records pile up when runs are replaced; drop them in bulk.
  if (s.order.size() > 2 * s.live + 1024) {
    std::deque<std::pair<LedgerId, EntryId>> kept;
    for (const auto& [ledger, entry] : s.order) {
      auto it = s.runs.find(ledger);
      if (it == s.runs.end()) continue;
      const Run& run = it->second;
      if (entry >= run.first && entry < run.first + static_cast<EntryId>(run.entries.size())) {
        kept.emplace_back(ledger, entry);
      }
    }
    s.order.swap(kept);
  }
}

std::optional<Slice> EntryCache::get(LedgerId ledger, EntryId entry) const {
  Shard& s = shard(ledger);
  std::lock_guard lock(s.mu);
  auto it = s.runs.find(ledger);
  if (it == s.runs.end()) return std::nullopt;
  const Run& run = it->second;
  if (entry < run.first || entry >= run.first + static_cast<EntryId>(run.entries.size())) return std::nullopt;
  return run.entries[static_cast<size_t>(entry - run.first)];
}

size_t EntryCache::get_range(LedgerId ledger, EntryId first, EntryId last, size_t max_bytes,
                             std::vector<Entry>* out, size_t* bytes) const {
  Shard& s = shard(ledger);
  std::lock_guard lock(s.mu);
  auto it = s.runs.find(ledger);
  if (it == s.runs.end()) return 0;
  const Run& run = it->second;
  EntryId end = std::min(last + 1, run.first + static_cast<EntryId>(run.entries.size()));
  size_t added = 0;
  for (EntryId e = first; e >= run.first && e < end; ++e) {
    const Slice& data = run.entries[static_cast<size_t>(e - run.first)];
    if (!out->empty() && *bytes + data.size() > max_bytes) break;
    *bytes += data.size();
    out->push_back(Entry{ledger, e, data});
    ++added;
  }
  return added;
}

void EntryCache::erase_ledger(LedgerId ledger) {
  Shard& s = shard(ledger);
  std::lock_guard lock(s.mu);
  auto it = s.runs.find(ledger);
  if (it == s.runs.end()) return;
  size_t dropped = 0;
  for (const Slice& e : it->second.entries) dropped += e.size();
  account(s, 0, dropped);
  s.live -= it->second.entries.size();
  s.runs.erase(it);
}

size_t EntryCache::size_bytes() const {
  size_t total = 0;
  for (const Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    total += s.bytes;
  }
  return total;
}

}  // namespace magnetar::storage
