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

const EntryCache::Run* EntryCache::find_run(const Shard& s, LedgerId ledger, EntryId entry) {
  auto it = s.runs.find(ledger);
  if (it == s.runs.end()) return nullptr;
  for (const Run& run : it->second) {
    if (run.holds(entry)) return &run;
  }
  return nullptr;
}

void EntryCache::drop_run(Shard& s, Runs& runs, size_t i) {
  size_t dropped = 0;
  for (const Slice& e : runs[i].entries) dropped += e.size();
  account(s, 0, dropped);
  s.live -= runs[i].entries.size();
  runs.erase(runs.begin() + static_cast<std::ptrdiff_t>(i));
}

void EntryCache::insert(LedgerId ledger, EntryId entry, Slice data) {
  if (capacity_ == 0) return;
  Shard& s = shard(ledger);
  std::lock_guard lock(s.mu);
  Runs& runs = s.runs[ledger];
  Run* into = nullptr;
  for (Run& run : runs) {
    if (run.holds(entry)) return;  // already held
    if (run.end() == entry && !run.entries.empty()) into = &run;
  }
  if (into == nullptr) {
    if (runs.size() >= kMaxRuns) {
      size_t oldest = 0;
      for (size_t i = 1; i < runs.size(); ++i) {
        if (runs[i].used < runs[oldest].used) oldest = i;
      }
      drop_run(s, runs, oldest);
    }
    runs.push_back(Run{entry, {}, 0});
    into = &runs.back();
  }
  into->used = ++s.clock;
  account(s, data.size(), 0);
  ++s.live;
  into->entries.push_back(std::move(data));
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
    if (it == s.runs.end()) continue;  // stale
    Runs& runs = it->second;
    auto run = std::find_if(runs.begin(), runs.end(),
                            [&](const Run& r) { return !r.entries.empty() && r.first == entry; });
    if (run == runs.end()) continue;  // stale
    account(s, 0, run->entries.front().size());
    --s.live;
    run->entries.pop_front();
    ++run->first;
    if (run->entries.empty()) runs.erase(run);
    if (runs.empty()) s.runs.erase(it);
  }
  // Stale order records pile up when runs are replaced; drop them in bulk.
  if (s.order.size() > 2 * s.live + 1024) {
    std::deque<std::pair<LedgerId, EntryId>> kept;
    for (const auto& [ledger, entry] : s.order) {
      if (find_run(s, ledger, entry) != nullptr) kept.emplace_back(ledger, entry);
    }
    s.order.swap(kept);
  }
}

std::optional<Slice> EntryCache::get(LedgerId ledger, EntryId entry) const {
  Shard& s = shard(ledger);
  std::lock_guard lock(s.mu);
  const Run* run = find_run(s, ledger, entry);
  if (run == nullptr) return std::nullopt;
  return run->entries[static_cast<size_t>(entry - run->first)];
}

size_t EntryCache::get_range(LedgerId ledger, EntryId first, EntryId last, size_t max_bytes,
                             std::vector<Entry>* out, size_t* bytes) const {
  Shard& s = shard(ledger);
  std::lock_guard lock(s.mu);
  const Run* run = find_run(s, ledger, first);
  if (run == nullptr) return 0;
  run->used = ++s.clock;
  EntryId end = std::min(last + 1, run->end());
  size_t added = 0;
  for (EntryId e = first; e < end; ++e) {
    const Slice& data = run->entries[static_cast<size_t>(e - run->first)];
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
  while (!it->second.empty()) drop_run(s, it->second, it->second.size() - 1);
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
