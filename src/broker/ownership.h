// Ownership: which node of the cluster serves a topic.
//
// Every topic has exactly one owning node at a time. A namespace is split
// into bundles (kBundlesPerNamespace at first, more once one is split:
// bundle_layout.h), ranges of a 32-bit hash of topic names
// (partitions hash apart, so a partitioned topic spreads over nodes), as
// Pulsar splits it; a node owns whole bundles. A standalone node owns
// everything.
//
// The broker loads a topic only where it is owned (BrokerService asks
// before it opens one, and answers kWrongNode elsewhere); each protocol
// names the owner to its clients: Pulsar's lookup, Kafka's partition
// leaders.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "broker/naming.h"
#include "common/result.h"

namespace magnetar::broker {

inline constexpr uint32_t kBundlesPerNamespace = 4;

// A node that serves topics, as clients reach it.
struct NodeEndpoints {
  uint64_t node = 0;        // the node's id (0: a standalone node)
  int32_t broker_id = 0;    // its Kafka broker id: small, never reused
  bool here = true;         // this node
  std::string pulsar_url;   // pulsar://host:port ("" when off)
  std::string pulsar_tls_url;
  std::string http_url;
  std::string kafka_host;
  int32_t kafka_port = 0;
  std::string amqp_url;     // amqp://host:port ("" when off)
};

// The bundle `topic` falls in: "0x00000000_0x40000000", Pulsar's form, as
// this process knows its namespace's layout (bundle_layout.h).
std::string bundle_of(const TopicName& topic);
// Every bundle of `ns`, in hash order, in the same form (bundle_layout.h:
// the default four until one is split).
std::vector<std::string> namespace_bundles(const NamespaceName& ns);
// "tenant/namespace/range": how a bundle is named across namespaces.
std::string qualified_bundle(const TopicName& topic);
// The metadata folder of `ns`'s bundle owners in a cluster ("/bundles/tenant/namespace").
std::string bundle_owners_key(const NamespaceName& ns);

// A bundle and its owner, as a node knows them.
struct BundleOwner {
  std::string range;  // "0x00000000_0x40000000"
  uint64_t node = 0;  // 0: not assigned yet
  bool alive = false;
  bool releasing = false;  // being handed over by its owner (this node)
};
// The 32-bit hash bundles are ranges of.
uint32_t topic_hash(const TopicName& topic);

// Calls between cluster members for the layers above the cluster (the
// cluster port's RPC channel): a protocol asks the owner of a topic to do
// what only the owner can (a Kafka group's offsets on a partition owned by
// another member). Methods are numbered in cluster/rpc_format.h.
class RemoteCalls {
 public:
  using Reply = std::function<void(std::string payload)>;
  using Handler = std::function<void(std::string_view payload, Reply reply)>;
  using Done = std::function<void(common::Result<std::string>)>;
  virtual ~RemoteCalls() = default;
  // Any thread: calls `method` on member `node`; `done` runs on any thread,
  // with the reply or why there is none (rpc.h: Unavailable never sent,
  // Timeout sent and unanswered).
  virtual void call(uint64_t node, uint16_t method, std::string payload, Done done) = 0;
  // Any thread: `handler` answers `method` from other members. It runs on
  // the cluster's own thread and must not block; `reply` may be called from
  // any thread.
  virtual void handle(uint16_t method, Handler handler) = 0;
};

class Ownership {
 public:
  using OwnerCallback = std::function<void(common::Result<NodeEndpoints>)>;
  virtual ~Ownership() = default;

  // Any thread: the node that owns `topic`'s bundle, assigning the bundle to
  // a live node when nobody owns it yet. `done` may run on any thread.
  // NotFound when the namespace does not exist; Unavailable when the owner
  // cannot be told (no live node, metadata unreachable).
  virtual void owner_of(const TopicName& topic, OwnerCallback done) = 0;
  // Any thread, without waiting: the owner when this node knows it already.
  virtual std::optional<NodeEndpoints> known_owner(const TopicName& topic) const = 0;
  // Any thread: whether this node's cluster lease is current. Without it
  // the bundles it knows as its own may already be another's (cut off from
  // the members, it is counted dead and they are taken over).
  virtual bool lease_current() const { return true; }
  // Whether `owner` is this node with its lease lapsed: what it knows as its
  // own may already be another's, so it must not name itself the owner.
  bool lapsed_here(const NodeEndpoints& owner) const { return owner.here && !lease_current(); }
  // Any thread: `topic`'s log was taken over by another node while this
  // one named itself its owner: what is cached about its bundle is stale.
  // The next lookup reads the store, and if the bundle is another's, this
  // node's topics of it close.
  virtual void doubt(const TopicName& topic) { (void)topic; }
  // Any thread: every node that serves topics and is alive, this one too.
  virtual std::vector<NodeEndpoints> live_nodes() const = 0;
  // This node.
  virtual NodeEndpoints self() const = 0;
  // Any thread: the bundles `node` owns ("tenant/namespace/range"), as far as this node knows.
  virtual std::vector<std::string> bundles_of(uint64_t node) const = 0;
  // Any thread: whether this node is handing `topic`'s bundle over (its
  // topics must not load here meanwhile; clients are told to retry).
  virtual bool releasing(const TopicName& topic) const = 0;
  // Any thread: moves `bundle` ("tenant/namespace/range") off its owner,
  // which closes its topics first, to `destination` (0: the live broker
  // owning the fewest bundles). Asks the owner over the cluster when it is
  // another node; a bundle nobody owns is left so. `done` on any thread.
  virtual void unload(const std::string& bundle, uint64_t destination, std::function<void(common::Status)> done) = 0;
  // Any thread: the bundles of `ns` and their owners, as this node knows them.
  virtual std::vector<BundleOwner> bundles_in(const NamespaceName& ns) const = 0;
  // Any thread: cuts `bundle` ("tenant/namespace/range") in two halves, or
  // at `positions` (bundle_layout.h: split_cuts). Its owner does it (asked
  // over the cluster when it is another node) and keeps every piece, its
  // topics staying where they are; with `unload`, the pieces are unloaded
  // afterwards so that lookups spread them. `done` on any thread.
  virtual void split(const std::string& bundle, std::vector<uint32_t> positions, bool unload,
                     std::function<void(common::Status)> done) = 0;
};

}  // namespace magnetar::broker
