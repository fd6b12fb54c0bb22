// NodeDirectory: a cluster member's view of every node that serves topics:
// what each published about itself under /cluster/nodes/<id> (its client
// addresses, Kafka broker id, roles) and whether the cluster hears from it.
//
// The records are read at start and kept current by a watch; liveness comes
// from the membership (cluster/node.h) at each call. Answers come from what
// this member has applied, never from a read through the leader, so a member
// cut off from the majority still answers (with what it last knew).
//
// Threads: nodes() from any thread.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "broker/ownership.h"
#include "common/status.h"
#include "metadata/store.h"
#include "runtime/component.h"

namespace magnetar::cluster {
class ClusterNode;
}

namespace magnetar::server {

// broker::RemoteCalls over the membership's RPC.
class ClusterCalls final : public broker::RemoteCalls {
 public:
  explicit ClusterCalls(cluster::ClusterNode& cluster) : cluster_(cluster) {}
  void call(uint64_t node, uint16_t method, std::string payload, Done done) override;
  void handle(uint16_t method, Handler handler) override;

 private:
  cluster::ClusterNode& cluster_;
};

class NodeDirectory final : public runtime::Component {
 public:
  NodeDirectory(metadata::Store& store, cluster::ClusterNode& cluster);
  ~NodeDirectory() override;

  std::string_view name() const override { return "node-directory"; }
  // Reads every record (blocking) and watches for changes.
  common::Status start() override;
  void stop() override;
  // Every node with the broker role that published its addresses, and whether it is alive.
  std::vector<std::pair<broker::NodeEndpoints, bool>> nodes() const;

  // Any thread: reads node `id`'s record from the store (the watch may not
  // have brought it yet); `done` runs on any thread once it is remembered.
  void refresh(uint64_t id, std::function<void()> done);

  // What every node published, as it published it (JSON), brokers or not.
  std::map<uint64_t, std::string> published() const;

  // Any thread: whether node `id` keeps ledger copies (its record names the
  // storage role; a node not yet heard of is taken to) and the zone it
  // declared ("" for none).
  bool stores(uint64_t id) const;
  std::string zone_of(uint64_t id) const;
  // The storage group it declared ("" for none).
  std::string group_of(uint64_t id) const;

  // The record's fields as endpoints; false when it is not a node record.
  static bool parse_record(uint64_t id, const std::string& json, broker::NodeEndpoints& out);

 private:
  void remember(const std::string& key, const std::string& value);

  metadata::Store& store_;
  cluster::ClusterNode& cluster_;
  metadata::WatchId watch_ = 0;
  mutable std::mutex mu_;
  std::map<uint64_t, broker::NodeEndpoints> records_;  // brokers only
  std::map<uint64_t, std::string> published_;          // every node's record
  struct Storage {
    bool stores = true;
    std::string zone;
    std::string group;
  };
  std::map<uint64_t, Storage> storage_;                 // every node's storage role and zone
};

}  // namespace magnetar::server
