// KeySharedSelector: which consumer of a Key_Shared subscription owns a key.
//
// A key is hashed with murmur3_32 (seed 0, sign bit cleared, as Pulsar does)
// into one of kHashRangeSize slots; each consumer owns ranges of slots.
//   - auto-split: the first consumer owns [0, 65535]; each consumer that joins
//     takes the lower half of the widest range (its owner keeps the upper
//     half); a consumer that leaves gives its range to the owner of the range
//     just above it (the topmost range goes to the one just below).
//   - sticky: consumers name their own inclusive ranges; a range that
//     overlaps another consumer's is refused, and slots nobody named are not
//     dispatched.
// Entries without a key hash the empty key, so they all go to one consumer.
//
// Not thread-safe: owned by its Subscription on the topic's home reactor.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "broker/consumer.h"
#include "common/status.h"

namespace magnetar::broker {

inline constexpr uint32_t kHashRangeSize = 65536;

// murmur3_32 of `key` with the sign bit cleared (Pulsar's sticky key hash).
uint32_t sticky_key_hash(std::string_view key);
// The slot the key falls in: sticky_key_hash(key) % kHashRangeSize.
inline uint32_t sticky_key_slot(std::string_view key) { return sticky_key_hash(key) % kHashRangeSize; }

class KeySharedSelector {
 public:
  explicit KeySharedSelector(KeySharedMode mode) : mode_(mode) {}

  KeySharedMode mode() const { return mode_; }

  // Gives consumer `id` its slots. Auto-split ignores `ranges`;
  // kResourceExhausted when no range is wide enough to split. Sticky needs
  // at least one range: kInvalidArgument when none, or one is empty or out
  // of [0, 65535]; kFailedPrecondition when one overlaps a range another
  // consumer (or another of `ranges`) holds. On error nothing changes.
  common::Status add_consumer(uint64_t id, const std::vector<HashRange>& ranges);
  void remove_consumer(uint64_t id);

  // The consumer owning `slot`, if any.
  std::optional<uint64_t> select(uint32_t slot) const;
  // The ranges `id` owns, lowest first.
  std::vector<HashRange> ranges_of(uint64_t id) const;
  bool empty() const { return ranges_.empty(); }

 private:
  struct Owned {
    uint32_t start;
    uint64_t consumer;
  };
  KeySharedMode mode_;
  // By each range's inclusive end. Auto-split ranges are contiguous and
  // cover every slot; sticky ones may leave gaps.
  std::map<uint32_t, Owned> ranges_;
};

}  // namespace magnetar::broker
