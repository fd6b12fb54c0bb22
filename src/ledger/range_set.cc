#include "ledger/range_set.h"

#include <algorithm>
#include <bit>
#include <cassert>

namespace magnetar::ledger {

namespace {

// Bits lo..hi (inclusive, 0..63) of a word.
uint64_t mask(uint64_t lo, uint64_t hi) {
  uint64_t upper = hi == 63 ? ~0ull : ((1ull << (hi + 1)) - 1);
  return upper & ~((1ull << lo) - 1);
}

}  // namespace

void RangeSet::materialize(Chunk& c) {
  if (c.bits) return;
  c.bits = std::make_unique<uint64_t[]>(kWords);
  std::fill(c.bits.get(), c.bits.get() + kWords, c.full() ? ~0ull : 0ull);
}

uint32_t RangeSet::set_bits(Chunk& c, uint64_t from, uint64_t to) {
  if (c.full()) return 0;
  if (c.count == 0 && from == 0 && to == kChunkEntries - 1) {
    c.bits.reset();
    c.count = kChunkEntries;
    return kChunkEntries;
  }
  materialize(c);
  uint32_t added = 0;
  for (uint64_t w = from / 64; w <= to / 64; ++w) {
    uint64_t m = mask(w == from / 64 ? from % 64 : 0, w == to / 64 ? to % 64 : 63);
    added += static_cast<uint32_t>(std::popcount(m & ~c.bits[w]));
    c.bits[w] |= m;
  }
  c.count += added;
  if (c.full()) c.bits.reset();
  return added;
}

void RangeSet::add(Position p) {
  assert(p.entry >= 0);
  add_range(p.ledger, p.entry, p.entry);
}

void RangeSet::add_range(LedgerId ledger, EntryId first, EntryId last) {
  assert(first >= 0 && first <= last);
  uint64_t e = static_cast<uint64_t>(first);
  const uint64_t end = static_cast<uint64_t>(last);
  while (e <= end) {
    uint64_t chunk = e / kChunkEntries;
    uint64_t hi = std::min(end, (chunk + 1) * kChunkEntries - 1);
    size_ += set_bits(chunks_[{ledger, chunk}], e % kChunkEntries, hi % kChunkEntries);
    e = hi + 1;
  }
}

bool RangeSet::contains(Position p) const {
  if (p.entry < 0) return false;
  uint64_t e = static_cast<uint64_t>(p.entry);
  auto it = chunks_.find({p.ledger, e / kChunkEntries});
  return it != chunks_.end() && it->second.test(e % kChunkEntries);
}

void RangeSet::remove_through(Position p) {
  const Key bound = p.entry < 0 ? Key{p.ledger, 0} : Key{p.ledger, static_cast<uint64_t>(p.entry) / kChunkEntries};
  auto it = chunks_.begin();
  while (it != chunks_.end() && it->first < bound) {
    size_ -= it->second.count;
    it = chunks_.erase(it);
  }
  if (p.entry < 0 || it == chunks_.end() || it->first != bound) return;
  Chunk& c = it->second;
  materialize(c);
  const uint64_t last = static_cast<uint64_t>(p.entry) % kChunkEntries;
  uint32_t removed = 0;
  for (uint64_t w = 0; w <= last / 64; ++w) {
    uint64_t m = mask(0, w == last / 64 ? last % 64 : 63);
    removed += static_cast<uint32_t>(std::popcount(m & c.bits[w]));
    c.bits[w] &= ~m;
  }
  c.count -= removed;
  size_ -= removed;
  if (c.count == 0) chunks_.erase(it);
}

uint64_t RangeSet::count_in(LedgerId ledger, EntryId first, EntryId last) const {
  if (last < first || last < 0) return 0;
  const uint64_t lo = static_cast<uint64_t>(std::max<EntryId>(first, 0));
  const uint64_t hi = static_cast<uint64_t>(last);
  uint64_t total = 0;
  for (auto it = chunks_.lower_bound({ledger, lo / kChunkEntries});
       it != chunks_.end() && it->first.first == ledger && it->first.second <= hi / kChunkEntries; ++it) {
    const uint64_t base = it->first.second * kChunkEntries;
    const uint64_t from = std::max(lo, base) - base;
    const uint64_t to = std::min(hi, base + kChunkEntries - 1) - base;
    const Chunk& c = it->second;
    if (c.full()) {
      total += to - from + 1;
      continue;
    }
    for (uint64_t w = from / 64; w <= to / 64; ++w) {
      uint64_t m = mask(w == from / 64 ? from % 64 : 0, w == to / 64 ? to % 64 : 63);
      total += static_cast<uint64_t>(std::popcount(m & c.bits[w]));
    }
  }
  return total;
}

EntryId RangeSet::first_absent(LedgerId ledger, EntryId from) const {
  uint64_t e = static_cast<uint64_t>(std::max<EntryId>(from, 0));
  for (;;) {
    auto it = chunks_.find({ledger, e / kChunkEntries});
    if (it == chunks_.end()) return static_cast<EntryId>(e);
    const Chunk& c = it->second;
    const uint64_t base = it->first.second * kChunkEntries;
    if (!c.full()) {
      for (uint64_t i = e - base; i < kChunkEntries;) {
        const uint64_t off = i % 64;
        // The shift leaves zeros on top, so the run of ones ends in this word.
        const uint64_t ones = static_cast<uint64_t>(std::countr_one(c.bits[i / 64] >> off));
        if (ones < 64 - off) return static_cast<EntryId>(base + i + ones);
        i += 64 - off;
      }
    }
    e = base + kChunkEntries;
  }
}

void RangeSet::clear() {
  chunks_.clear();
  size_ = 0;
}

std::vector<RangeSet::Range> RangeSet::ranges(size_t max) const {
  std::vector<Range> out;
  if (max == 0) return out;
  // Adds a run, joined to the last one when adjacent (a run may cross
  // chunks). False when it would start run max + 1: the last one kept is
  // then complete.
  auto emit = [&](LedgerId ledger, EntryId first, EntryId last) {
    if (!out.empty() && out.back().ledger == ledger && out.back().last + 1 == first) {
      out.back().last = last;
      return true;
    }
    if (out.size() == max) return false;
    out.push_back(Range{ledger, first, last});
    return true;
  };
  for (const auto& [key, c] : chunks_) {
    const EntryId base = static_cast<EntryId>(key.second * kChunkEntries);
    if (c.full()) {
      if (!emit(key.first, base, base + static_cast<EntryId>(kChunkEntries) - 1)) return out;
      continue;
    }
    uint64_t i = 0;
    while (i < kChunkEntries) {
      uint64_t word = c.bits[i / 64] >> (i % 64);
      if (word == 0) {
        i = (i / 64 + 1) * 64;
        continue;
      }
      i += static_cast<uint64_t>(std::countr_zero(word));  // first set bit
      uint64_t start = i;
      while (i < kChunkEntries && ((c.bits[i / 64] >> (i % 64)) & 1)) {
        uint64_t run = static_cast<uint64_t>(std::countr_one(c.bits[i / 64] >> (i % 64)));
        i += std::min(run, 64 - i % 64);
      }
      if (!emit(key.first, base + static_cast<EntryId>(start), base + static_cast<EntryId>(i) - 1)) return out;
    }
  }
  return out;
}

size_t RangeSet::memory_bytes() const {
  size_t bytes = chunks_.size() * (sizeof(Key) + sizeof(Chunk) + 4 * sizeof(void*));
  for (const auto& [key, c] : chunks_) {
    if (c.bits) bytes += kWords * sizeof(uint64_t);
  }
  return bytes;
}

}  // namespace magnetar::ledger
