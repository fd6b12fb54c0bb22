// Transport: how the replicated storage reaches storage nodes, behind an
// interface so that the cluster supplies it (server/) and unit tests can
// wire several storage nodes in one process.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "replication/ledger_meta.h"

namespace magnetar::runtime {
class Reactor;
}

namespace magnetar::replication {

// Storage protocol methods (cluster/rpc_format.h numbers them the same).
enum class StorageMethod : uint16_t {
  kAdd = 120,     // AddEntry -> Outcome
  kRead = 121,    // ReadEntries -> ReadReply
  kFence = 122,   // Fence -> FenceReply
  kDelete = 123,  // DeleteReplica -> Outcome
};

class Transport {
 public:
  using Done = std::function<void(common::Result<std::string>)>;
  virtual ~Transport() = default;
  // The reactor the replicated storage keeps its state on; every `done`
  // runs there.
  virtual runtime::Reactor& reactor() = 0;
  virtual NodeId self() const = 0;
  // The storage nodes that are members and alive now, as this node knows.
  virtual std::vector<NodeId> live_storage_nodes() = 0;
  // The zone storage node `node` declared (`--zone`); empty when none.
  virtual std::string zone_of(NodeId node) {
    (void)node;
    return {};
  }
  // The storage group storage node `node` declared (`--storage-group`); empty when none.
  virtual std::string group_of(NodeId node) {
    (void)node;
    return {};
  }
  // Calls `method` on storage node `node` (this node's own server too);
  // `done` runs exactly once, never inline.
  virtual void call(NodeId node, StorageMethod method, std::string payload, Done done, unsigned timeout_ms) = 0;
};

}  // namespace magnetar::replication
