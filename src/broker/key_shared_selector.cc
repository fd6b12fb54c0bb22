#include "broker/key_shared_selector.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace magnetar::broker {

using common::Status;

namespace {
uint32_t rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

uint32_t mix_k(uint32_t k) {
  k *= 0xcc9e2d51u;
  k = rotl(k, 15);
  return k * 0x1b873593u;
}

std::string range_text(const HashRange& r) {
  return "[" + std::to_string(r.start) + ", " + std::to_string(r.end) + "]";
}
}  // namespace

uint32_t sticky_key_hash(std::string_view key) {
  const auto* data = reinterpret_cast<const uint8_t*>(key.data());
  size_t len = key.size();
  uint32_t h = 0;
  size_t blocks = len / 4;
  for (size_t i = 0; i < blocks; ++i) {
    uint32_t k = static_cast<uint32_t>(data[4 * i]) | static_cast<uint32_t>(data[4 * i + 1]) << 8 |
                 static_cast<uint32_t>(data[4 * i + 2]) << 16 | static_cast<uint32_t>(data[4 * i + 3]) << 24;
    h ^= mix_k(k);
    h = rotl(h, 13);
    h = h * 5 + 0xe6546b64u;
  }
  const uint8_t* tail = data + blocks * 4;
  uint32_t k = 0;
  switch (len & 3) {
    case 3: k ^= static_cast<uint32_t>(tail[2]) << 16; [[fallthrough]];
    case 2: k ^= static_cast<uint32_t>(tail[1]) << 8; [[fallthrough]];
    case 1:
      k ^= tail[0];
      h ^= mix_k(k);
  }
  h ^= static_cast<uint32_t>(len);
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h & 0x7fffffffu;
}

Status KeySharedSelector::add_consumer(uint64_t id, const std::vector<HashRange>& ranges) {
  if (mode_ == KeySharedMode::kAutoSplit) {
    if (ranges_.empty()) {
      ranges_[kHashRangeSize - 1] = Owned{0, id};
      return Status::ok();
    }
    auto widest = ranges_.end();
    uint32_t widest_size = 0;
    for (auto it = ranges_.begin(); it != ranges_.end(); ++it) {
      uint32_t size = it->first - it->second.start + 1;
      if (size > widest_size) {
        widest_size = size;
        widest = it;
      }
    }
    if (widest_size < 2) return Status::resource_exhausted("no hash range is left to give a new consumer");
    uint32_t lo = widest->second.start;
    uint32_t mid = widest->first - widest_size / 2;  // the new consumer takes [lo, mid]
    widest->second.start = mid + 1;
    ranges_[mid] = Owned{lo, id};
    return Status::ok();
  }
  if (ranges.empty()) return Status::invalid_argument("a sticky Key_Shared consumer must name its hash ranges");
  std::vector<HashRange> sorted = ranges;
  std::sort(sorted.begin(), sorted.end(), [](const HashRange& a, const HashRange& b) { return a.start < b.start; });
  for (size_t i = 0; i < sorted.size(); ++i) {
    const HashRange& r = sorted[i];
    if (r.start > r.end || r.end >= kHashRangeSize) {
      return Status::invalid_argument("hash range " + range_text(r) + " is empty or outside [0, " +
                                      std::to_string(kHashRangeSize - 1) + "]");
    }
    if (i > 0 && sorted[i - 1].end >= r.start) {
      return Status::failed_precondition("hash ranges " + range_text(sorted[i - 1]) + " and " + range_text(r) +
                                         " overlap");
    }
    auto it = ranges_.lower_bound(r.start);  // first existing range ending at or after r.start
    if (it != ranges_.end() && it->second.start <= r.end) {
      return Status::failed_precondition("hash range " + range_text(r) + " overlaps " +
                                         range_text(HashRange{it->second.start, it->first}) + " of consumer " +
                                         std::to_string(it->second.consumer));
    }
  }
  for (const HashRange& r : sorted) ranges_[r.end] = Owned{r.start, id};
  return Status::ok();
}

void KeySharedSelector::remove_consumer(uint64_t id) {
  for (auto it = ranges_.begin(); it != ranges_.end();) {
    if (it->second.consumer != id) {
      ++it;
      continue;
    }
    if (mode_ == KeySharedMode::kSticky) {
      it = ranges_.erase(it);
      continue;
    }
    uint32_t start = it->second.start;
    uint32_t end = it->first;
    it = ranges_.erase(it);
    if (it != ranges_.end()) {
      it->second.start = start;  // the range above absorbs it
    } else if (!ranges_.empty()) {
      // The topmost range goes to its neighbour below.
      auto below = std::prev(ranges_.end());
      Owned owned = below->second;
      ranges_.erase(below);
      ranges_[end] = owned;
      it = ranges_.end();
    }
  }
}

std::optional<uint64_t> KeySharedSelector::select(uint32_t slot) const {
  auto it = ranges_.lower_bound(slot);
  if (it == ranges_.end() || it->second.start > slot) return std::nullopt;
  return it->second.consumer;
}

std::vector<HashRange> KeySharedSelector::ranges_of(uint64_t id) const {
  std::vector<HashRange> out;
  for (const auto& [end, owned] : ranges_) {
    if (owned.consumer == id) out.push_back(HashRange{owned.start, end});
  }
  return out;
}

}  // namespace magnetar::broker
