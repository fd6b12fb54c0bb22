// BundleOwnership: Ownership for a cluster member, kept in the metadata
// store.
//
// "/bundles/<tenant>/<namespace>/<range>" holds the id of the node that owns
// the bundle. The first node that needs a bundle's owner and finds none
// assigns it (in a namespace that exists; NotFound otherwise, so that
// lookups of invented namespaces leave nothing behind), with a create-only write, to the live node that owns the fewest
// bundles (ties go by the bundle's hash); a node that lost the race reads the
// winner's. An assignment is permanent here: the bundle's data stays on its
// owner's disk (there is no replication yet), so when that node is down its
// bundles wait for it rather than move to a node without the data.
//
// Assignments are cached in memory and kept current by a watch on
// "/bundles/", so lookups cost a metadata read only the first time.
//
// Threads: every call from any thread; callbacks on any thread.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "broker/ownership.h"
#include "metadata/store.h"
#include "runtime/component.h"

namespace magnetar::broker {

class BundleOwnership final : public Ownership, public runtime::Component {
 public:
  // The nodes that serve topics, this one included, with whether each is
  // alive now. Any thread.
  using Directory = std::function<std::vector<std::pair<NodeEndpoints, bool>>()>;

  // Reads node `id`'s published addresses afresh (the directory may not
  // have seen them yet, just after the node joined); `done` runs on any
  // thread once the directory has what the store holds.
  using Refresh = std::function<void(uint64_t id, std::function<void()> done)>;

  BundleOwnership(metadata::Store& store, uint64_t self_node, Directory directory, Refresh refresh = {});

  // Before start(): this node serves no topics (it has no broker role), so
  // it never assigns a bundle to itself.
  void set_serves_topics(bool serves) { serves_topics_ = serves; }

  std::string_view name() const override { return "ownership"; }
  // Reads the assignments (blocking) and watches them.
  common::Status start() override;
  void stop() override;

  void owner_of(const TopicName& topic, OwnerCallback done) override;
  std::optional<NodeEndpoints> known_owner(const TopicName& topic) const override;
  std::vector<NodeEndpoints> live_nodes() const override;
  NodeEndpoints self() const override;
  std::vector<std::string> bundles_of(uint64_t node) const override;

  // The metadata key of `topic`'s bundle.
  static std::string bundle_key(const TopicName& topic);

 private:
  // The endpoints of node `id`, or Unavailable when it has not published them.
  common::Result<NodeEndpoints> endpoints_of(uint64_t id) const;
  // endpoints_of(), reading the node's addresses afresh when the directory
  // has none yet.
  void resolve(uint64_t id, OwnerCallback done);
  void remember(const std::string& key, const std::string& value);
  void assign(const std::string& key, uint32_t hash, OwnerCallback done);

  metadata::Store& store_;
  const uint64_t self_node_;
  bool serves_topics_ = true;
  Directory directory_;
  Refresh refresh_;
  metadata::WatchId watch_ = 0;
  mutable std::mutex mu_;
  std::unordered_map<std::string, uint64_t> owners_;  // bundle key -> node
};

}  // namespace magnetar::broker
