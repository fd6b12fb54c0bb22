#include "protocol/kafka/server/exact_offsets.h"

namespace magnetar::protocol::kafka {

void ExactOffsets::remember(const std::string& group, const std::string& partition, int64_t exact,
                            int64_t aligned) {
  if (exact == aligned) return erase(group, partition);  // the cursor says it all
  auto [git, fresh_group] = groups_.try_emplace(group);
  Group& g = git->second;
  if (fresh_group) {
    g.in_groups = groups_order_.insert(groups_order_.end(), group);
  } else {
    groups_order_.splice(groups_order_.end(), groups_order_, g.in_groups);
  }
  auto it = g.entries.find(partition);
  if (it != g.entries.end()) {
    it->second.exact = exact;
    it->second.aligned = aligned;
    g.order.splice(g.order.end(), g.order, it->second.in_order);
    return;
  }
  g.entries.emplace(partition, Entry{exact, aligned, g.order.insert(g.order.end(), partition)});
  ++total_;
  if (g.entries.size() > max_per_group_) evict_oldest_of(group);
  while (total_ > max_total_ && !groups_order_.empty()) evict_oldest_of(groups_order_.front());
}

int64_t ExactOffsets::exact(const std::string& group, const std::string& partition, int64_t aligned) const {
  auto git = groups_.find(group);
  if (git == groups_.end()) return aligned;
  auto it = git->second.entries.find(partition);
  if (it == git->second.entries.end() || it->second.aligned != aligned) return aligned;
  return it->second.exact;
}

void ExactOffsets::forget_group(const std::string& group) {
  auto git = groups_.find(group);
  if (git == groups_.end()) return;
  total_ -= git->second.entries.size();
  groups_order_.erase(git->second.in_groups);
  groups_.erase(git);
}

void ExactOffsets::erase(const std::string& group, const std::string& partition) {
  auto git = groups_.find(group);
  if (git == groups_.end()) return;
  Group& g = git->second;
  auto it = g.entries.find(partition);
  if (it == g.entries.end()) return;
  g.order.erase(it->second.in_order);
  g.entries.erase(it);
  --total_;
  if (g.entries.empty()) forget_group(group);
}

void ExactOffsets::evict_oldest_of(std::string group) {
  auto git = groups_.find(group);
  if (git == groups_.end() || git->second.order.empty()) return;
  const std::string partition = git->second.order.front();  // a copy: erase frees it
  erase(group, partition);
  ++evicted_;
}

}  // namespace magnetar::protocol::kafka
