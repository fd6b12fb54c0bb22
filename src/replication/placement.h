// Placement: which storage nodes get a ledger's copies. A fragment's copies
// are never two on one node; when nodes declare zones (`--zone`), they are
// spread so that no zone holds two copies of a fragment while another holds
// fewer. Nodes that declare no zone are one zone among the others.
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

}  // namespace magnetar::replication
