// ExactOffsets: the committed offsets a group's cursors cannot hold.
//
// A cursor keeps whole entries, so a commit inside a batch entry moves the
// cursor to the entry's first offset (group_offsets.h); the offset the
// client sent is remembered here with that entry-aligned offset, and
// OffsetFetch answers it while the cursor still says the same. Commits on
// an entry boundary need no entry (and remove the one they replace).
//
// Bounded: at most `max_per_group` partitions per group and `max_total`
// over all groups. Past a bound the least recently committed entry goes
// (of the group, or of the group that committed least recently); its group
// then resumes that partition at the batch's first offset, as after a
// restart (memory only), reading a few records again: at least once, as
// Kafka consumers are.
//
// Not thread-safe: the owner locks (GroupCoordinator).
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>

namespace magnetar::protocol::kafka {

class ExactOffsets {
 public:
  ExactOffsets(size_t max_per_group, size_t max_total) : max_per_group_(max_per_group), max_total_(max_total) {}

  // Group `group` committed `exact` on `partition` ("topic\npartition"); its
  // cursor stands for `aligned`.
  void remember(const std::string& group, const std::string& partition, int64_t exact, int64_t aligned);
  // The exact offset remembered for (group, partition) with this aligned
  // offset, else `aligned`.
  int64_t exact(const std::string& group, const std::string& partition, int64_t aligned) const;
  // Forgets everything of `group` (its offsets were deleted).
  void forget_group(const std::string& group);

  size_t size() const { return total_; }
  // Entries dropped for a bound so far.
  uint64_t evicted() const { return evicted_; }

 private:
  struct Entry {
    int64_t exact;
    int64_t aligned;
    std::list<std::string>::iterator in_order;
  };
  struct Group {
    std::list<std::string> order;  // partitions, least recently committed first
    std::unordered_map<std::string, Entry> entries;
    std::list<std::string>::iterator in_groups;
  };
  void erase(const std::string& group, const std::string& partition);
  void evict_oldest_of(std::string group);  // a copy: it may name a list element erased

  const size_t max_per_group_;
  const size_t max_total_;
  std::list<std::string> groups_order_;  // least recently committed first
  std::unordered_map<std::string, Group> groups_;
  size_t total_ = 0;
  uint64_t evicted_ = 0;
};

}  // namespace magnetar::protocol::kafka
