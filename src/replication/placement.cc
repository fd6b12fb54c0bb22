#include "replication/placement.h"

#include <algorithm>
#include <cstdint>
#include <map>

namespace magnetar::replication {

std::vector<NodeId> choose_nodes(const std::vector<NodeId>& candidates, const std::vector<NodeId>& holding,
                                 size_t count, const std::function<std::string(NodeId)>& zone_of) {
  std::map<std::string, size_t> copies;  // by zone
  auto zone = [&](NodeId n) { return zone_of ? zone_of(n) : std::string(); };
  for (NodeId n : holding) copies[zone(n)]++;
  std::vector<NodeId> left;
  for (NodeId n : candidates) {
    const bool held = std::find(holding.begin(), holding.end(), n) != holding.end();
    if (!held && std::find(left.begin(), left.end(), n) == left.end()) left.push_back(n);
  }
  std::vector<NodeId> chosen;
  while (chosen.size() < count && !left.empty()) {
    size_t best = 0;
    size_t best_copies = SIZE_MAX;
    for (size_t i = 0; i < left.size(); ++i) {
      const size_t c = copies[zone(left[i])];
      if (c < best_copies) {
        best = i;
        best_copies = c;
      }
    }
    chosen.push_back(left[best]);
    copies[zone(left[best])]++;
    left.erase(left.begin() + static_cast<std::ptrdiff_t>(best));
  }
  return chosen;
}

}  // namespace magnetar::replication
