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

namespace {

bool listed(const std::string& names, const std::string& group) {
  if (group.empty()) return false;
  size_t at = 0;
  while (at <= names.size()) {
    size_t comma = names.find(',', at);
    if (comma == std::string::npos) comma = names.size();
    size_t a = at;
    size_t b = comma;
    while (a < b && names[a] == ' ') ++a;
    while (b > a && names[b - 1] == ' ') --b;
    if (names.compare(a, b - a, group) == 0 && b > a) return true;
    at = comma + 1;
  }
  return false;
}

}  // namespace

std::vector<std::vector<NodeId>> affinity_tiers(const std::vector<NodeId>& candidates, const Affinity& affinity,
                                                const std::function<std::string(NodeId)>& group_of) {
  if (!affinity.any()) return {candidates};
  std::vector<std::vector<NodeId>> tiers(2);
  for (NodeId n : candidates) {
    const std::string group = group_of ? group_of(n) : std::string();
    if (listed(affinity.primary, group)) {
      tiers[0].push_back(n);
    } else if (listed(affinity.secondary, group)) {
      tiers[1].push_back(n);
    }
  }
  return tiers;
}

std::vector<NodeId> choose_in_tiers(const std::vector<std::vector<NodeId>>& tiers, const std::vector<NodeId>& holding,
                                    size_t count, const std::function<std::string(NodeId)>& zone_of) {
  std::vector<NodeId> chosen;
  std::vector<NodeId> held = holding;
  for (const std::vector<NodeId>& tier : tiers) {
    if (chosen.size() >= count) break;
    for (NodeId n : choose_nodes(tier, held, count - chosen.size(), zone_of)) {
      chosen.push_back(n);
      held.push_back(n);
    }
  }
  return chosen;
}

}  // namespace magnetar::replication
