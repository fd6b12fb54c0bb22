// Placement: which storage nodes get a ledger's copies. A fragment's copies
// are never two on one node; when nodes declare zones (`--zone`), they are
// spread so that no zone holds two copies of a fragment while another holds
// fewer. Nodes that declare no zone are one zone among the others. A
// namespace's affinity group (Affinity) keeps the copies on the nodes of
// some storage groups, whatever their zones.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "replication/ledger_meta.h"

namespace magnetar::replication {

// Chooses up to `count` nodes of `candidates` for copies of a fragment whose
// other copies are on `holding` (never chosen). Each pick is the first
// candidate, in the order given, whose zone holds the fewest copies of
// `holding` and the nodes picked so far; the order given breaks ties, so a
// caller that wants a node first puts it first. Fewer than `count` when
// candidates run out.
std::vector<NodeId> choose_nodes(const std::vector<NodeId>& candidates, const std::vector<NodeId>& holding,
                                 size_t count, const std::function<std::string(NodeId)>& zone_of);

// A namespace's bookie affinity group: the storage groups (comma-separated
// names, `--storage-group`) its ledgers' copies are kept in, the primary
// ones first; the secondary ones only when the primary have too few nodes.
struct Affinity {
  std::string primary;
  std::string secondary;
  bool any() const { return !primary.empty() || !secondary.empty(); }
};

// `candidates` in tiers, each in the order given: without an affinity, one
// tier of them all; with one, the primary groups' nodes, then the
// secondary's; a node of no listed group is in none.
std::vector<std::vector<NodeId>> affinity_tiers(const std::vector<NodeId>& candidates, const Affinity& affinity,
                                                const std::function<std::string(NodeId)>& group_of);
// choose_nodes over each tier in turn, until `count` are chosen.
std::vector<NodeId> choose_in_tiers(const std::vector<std::vector<NodeId>>& tiers, const std::vector<NodeId>& holding,
                                    size_t count, const std::function<std::string(NodeId)>& zone_of);

}  // namespace magnetar::replication
