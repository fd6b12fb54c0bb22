// StorageNodeService: this member as a storage node of replicated ledgers
// (replication/storage_server.h answering on the cluster port), and the
// transport the member's replicated storage reaches every storage node
// through, itself included without a network hop.
//
// A wiped disk never serves as if it had its old data: the storage
// directory holds an INSTANCE file (a random id, written at its first start)
// and the metadata store `/storage/nodes/<member id>` the same id. A member
// whose record names an instance its directory lacks had its storage wiped
// or replaced: it takes a new instance and remembers the first ledger id
// not yet handed out then, below which it never answers "absent"
// (StorageServer::set_wiped_below).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "cluster/node.h"
#include "common/metrics.h"
#include "metadata/store.h"
#include "replication/storage_server.h"
#include "replication/transport.h"
#include "runtime/component.h"
#include "server/node_directory.h"
#include "storage/storage.h"

namespace magnetar::server {

class StorageNodeService final : public runtime::Component, public replication::Transport {
 public:
  StorageNodeService(cluster::ClusterNode& cluster, metadata::Store& store, storage::Storage& local,
                     std::string storage_dir, std::string fence_dir);
  ~StorageNodeService() override;

  std::string_view name() const override { return "storage-node"; }
  // After the local storage started: opens the fences and answers the storage protocol.
  common::Status start() override;
  void stop() override;

  // replication::Transport
  runtime::Reactor& reactor() override { return cluster_.reactor(); }
  replication::NodeId self() const override { return cluster_.id(); }
  std::vector<replication::NodeId> live_storage_nodes() override;
  std::string zone_of(replication::NodeId node) override;
  std::string group_of(replication::NodeId node) override;

  // Before start(): the other nodes' roles, zones and storage groups come
  // from `directory`; this node keeps copies when `stores` (its storage
  // role), in `zone` and storage group `group`.
  // A node without the storage role is never chosen for a copy; one asked
  // for a new copy anyway (chosen before its record was read) refuses, so
  // the writer replaces it.
  void set_roles(const NodeDirectory* directory, bool stores, std::string zone, std::string group);
  void call(replication::NodeId node, replication::StorageMethod method, std::string payload, Done done,
            unsigned timeout_ms) override;

 private:
  void serve(replication::StorageMethod method, std::string_view payload, replication::StorageServer::Reply reply);
  // Blocking: compares the directory's instance with the member's record.
  common::Status check_instance();

  cluster::ClusterNode& cluster_;
  metadata::Store& store_;
  const NodeDirectory* directory_ = nullptr;
  bool stores_ = true;
  std::string zone_;
  std::string group_;
  const std::string storage_dir_;
  storage::Storage& local_;
  replication::StorageServer server_;
  common::Gauge& wiped_below_;
  std::atomic<bool> started_{false};
};

}  // namespace magnetar::server
