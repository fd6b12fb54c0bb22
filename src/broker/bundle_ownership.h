// BundleOwnership: Ownership for a cluster member, kept in the metadata
// store.
//
// "/bundles/<tenant>/<namespace>/<range>" holds the id of the node that owns
// the bundle. The first node that needs a bundle's owner and finds none
// assigns it (in a namespace that exists; NotFound otherwise, so that
// lookups of invented namespaces leave nothing behind), with a create-only
// write, to the live node that owns the fewest bundles (ties go by the
// bundle's hash); a node that lost the race reads the winner's.
//
// A bundle moves, always by a compare-and-set on the version its mover read:
// - Failover: an owner the membership no longer hears from (cluster/node.h,
//   dead after kDeadAfterMs, by which time its own lease has lapsed, so it
//   acknowledges nothing more) loses its bundles to live brokers: at the
//   next lookup of one of its topics, and in a pass every second run by the
//   live broker with the lowest id. Only a node whose own lease is current
//   moves bundles: a node just started, or cut off, has no fresh view of who
//   is alive. The new owner's first open of each topic recovers and fences
//   the old owner's open ledger (ledger/managed_ledger.h), so a wrongly
//   presumed dead owner cannot add to it.
// - Handover (release(): unload, graceful stop): the owner marks the bundle
//   releasing (its topics refuse to load here, retriably), closes its loaded
//   topics (their logs close cleanly, clients are told), then writes the
//   new owner; clients that look the topics up again find it there.
// - Split (split()): the owner writes each piece as its own, then the
//   namespace's new layout (bundle_layout.h; the commit point), then
//   deletes the old bundle; its topics stay loaded. A lookup that finds no
//   owner reads the layout afresh before it assigns one, so a node whose
//   view of the layout lags never brings the old bundle back; the failover
//   pass deletes an old bundle a split left behind.
// Every node watches "/bundles/": a node that sees a bundle it served move
// to another closes its topics of that bundle (a failover of a node that
// was only cut off). A node that learns it sooner, from a topic's ledger
// fenced by the new owner (doubt()), stops naming itself the owner at once
// and reads the store (linearizable) for the truth.
//
// Assignments are cached in memory and kept current by the watch, so
// lookups cost a metadata read only the first time.
//
// Threads: every call from any thread; callbacks on any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "broker/isolation.h"
#include "broker/ownership.h"
#include "metadata/store.h"
#include "runtime/component.h"

namespace magnetar::runtime {
class Reactor;
class Timer;
}

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

  // Closes this node's loaded topics of `bundle` ("tenant/namespace/range"),
  // then calls `done` (any thread).
  using Unloader = std::function<void(const std::string& bundle, std::function<void()> done)>;

  BundleOwnership(metadata::Store& store, uint64_t self_node, Directory directory, Refresh refresh = {});
  ~BundleOwnership() override;

  // Before start(): this node serves no topics (it has no broker role), so
  // it never assigns a bundle to itself.
  void set_serves_topics(bool serves) { serves_topics_ = serves; }
  // Before start(): whether this node's cluster lease is current (any
  // thread). Without it, this node never moves a dead owner's bundles.
  void set_lease(std::function<bool()> valid) { lease_ = std::move(valid); }
  // Before start(): the cluster whose namespace isolation policies
  // (isolation.h) choose the brokers of isolated namespaces.
  void set_cluster(std::string cluster) { cluster_ = std::move(cluster); }
  // Before start(): how long a dead broker keeps its bundles before they move.
  void set_failover_after(std::chrono::milliseconds after) { failover_after_ = after; }
  // Before start(): where the failover pass runs every second (none: only
  // lookups move a dead owner's bundles).
  void set_reactor(runtime::Reactor* reactor) { reactor_ = reactor; }
  // Before start(): how this node closes its topics of a bundle it gives up.
  void set_unloader(Unloader unloader) { unloader_ = std::move(unloader); }
  // Before start(): how old a read of the directory may be when it answers
  // (default 100 ms, far below the ~5 s it takes to count a member dead).
  void set_directory_max_age(std::chrono::milliseconds age) { directory_max_age_ = age; }
  // Before start(): calls to other members, for unload() of a bundle owned
  // elsewhere (its owner releases it).
  void set_remote_calls(RemoteCalls* calls) { calls_ = calls; }

  std::string_view name() const override { return "ownership"; }
  // Reads the assignments (blocking) and watches them.
  common::Status start() override;
  void stop() override;

  void owner_of(const TopicName& topic, OwnerCallback done) override;
  std::optional<NodeEndpoints> known_owner(const TopicName& topic) const override;
  std::vector<NodeEndpoints> live_nodes() const override;
  NodeEndpoints self() const override;
  std::vector<std::string> bundles_of(uint64_t node) const override;
  bool lease_current() const override { return may_move(); }
  bool releasing(const TopicName& topic) const override;
  void doubt(const TopicName& topic) override;
  void unload(const std::string& bundle, uint64_t destination, std::function<void(common::Status)> done) override;
  std::vector<BundleOwner> bundles_in(const NamespaceName& ns) const override;
  void split(const std::string& bundle, std::vector<uint32_t> positions, bool unload,
             std::function<void(common::Status)> done) override;

  // Any thread: hands `bundle`, owned here, to `destination` (0: the live
  // broker owning the fewest bundles, not this one), closing its topics
  // here first. FailedPrecondition when this node does not own it.
  void release(const std::string& bundle, uint64_t destination, std::function<void(common::Status)> done);
  // Any thread: the live brokers the isolation policies let own `bundle`
  // ("tenant/namespace/range").
  std::vector<uint64_t> allowed_brokers(const std::string& bundle) const;
  // Blocking, at a graceful stop: takes no more bundles and releases every
  // bundle owned here to other live brokers, waiting at most `timeout`.
  // Returns how many moved.
  size_t hand_over(std::chrono::milliseconds timeout);

  // The metadata key of `topic`'s bundle.
  static std::string bundle_key(const TopicName& topic);

 private:
  using Nodes = std::vector<std::pair<NodeEndpoints, bool>>;
  // What directory_ answers, read again once it is directory_max_age_ old
  // (known_owner runs for every message an AMQP member forwards; the
  // directory builds its answer afresh each time); `fresh` reads it now.
  std::shared_ptr<const Nodes> nodes(bool fresh = false) const;
  // The endpoints of node `id`, or Unavailable when it has not published them.
  common::Result<NodeEndpoints> endpoints_of(uint64_t id, bool fresh = false) const;
  // endpoints_of(), reading the node's addresses afresh when the directory
  // has none yet.
  void resolve(uint64_t id, OwnerCallback done);
  struct Assignment {
    uint64_t node = 0;
    int64_t version = 0;    // of the metadata record
    int64_t announced = 0;  // the latest version a watch announced: newer while its read is out
    bool current() const { return announced <= version; }
  };
  // A watch says `key` changed to `version`: until the read of it answers,
  // what is cached for it is no answer (a bundle moved away must not be
  // named this node's in the meantime). On the thread that applies the
  // store's changes, before anything later is applied.
  void announce(const std::string& key, int64_t version);
  // Caches what the store holds for `key`; when that takes a bundle served
  // here away, closes its topics here.
  void remember(const std::string& key, const std::string& value, int64_t version);
  void forget(const std::string& key);
  void lost(const std::string& key);
  // The live broker owning the fewest bundles (ties by `hash`), other than
  // `excluded`, among those the isolation policies allow for `key`'s
  // namespace; 0 when there is none.
  uint64_t least_loaded(const std::string& key, uint32_t hash, uint64_t excluded) const;
  // The live brokers (this one while it serves topics) that may own `key`.
  std::vector<uint64_t> allowed_for(const std::string& key, uint64_t excluded) const;
  // Reads the isolation policies again (after a change), without waiting.
  void reload_isolation();
  void assign(const std::string& key, uint32_t hash, OwnerCallback done);
  // Moves `key` from dead `from` (at `version`) to a live broker.
  void take_over(const std::string& key, uint64_t from, int64_t version, OwnerCallback done);
  // Writes `to` as `key`'s owner over `version`, then reads back who owns it.
  void move(const std::string& key, int64_t version, uint64_t to, const std::string& why, OwnerCallback done);
  // split() of a bundle owned here: every piece is written as this node's,
  // then the layout (the commit point), then the old bundle goes.
  void split_here(const std::string& bundle, std::vector<uint32_t> positions, bool unload,
                  std::function<void(common::Status)> done);
  // Whether `key` names a bundle its namespace's layout has split since.
  static bool split_away(const std::string& key);
  // One pass of hand_over(): releases what this node owns now.
  size_t hand_over_once(std::chrono::milliseconds timeout);
  // Whether `node` is a live broker, as the membership says.
  bool alive(uint64_t node, bool fresh = false) const;
  // Whether `node`'s bundles may move: this node's view is current and
  // `node` has been dead for failover_after_.
  bool movable(uint64_t node) const;
  // movable(), once the caller knows whether `node` is alive.
  bool movable_given(uint64_t node, bool node_alive) const;
  bool may_move() const { return !lease_ || lease_(); }
  // The failover pass: the bundles of dead owners go to live brokers, then
  // bundles on brokers their isolation policy does not allow move.
  void failover_pass();
  void move_misplaced(const std::unordered_set<uint64_t>& live);

  // What the store's callbacks reach this object through: null once it stopped.
  struct Guard {
    std::mutex mu;
    BundleOwnership* self = nullptr;
  };
  std::shared_ptr<Guard> guard_ = std::make_shared<Guard>();
  metadata::Store& store_;
  const uint64_t self_node_;
  std::atomic<bool> serves_topics_{true};
  Directory directory_;
  mutable std::mutex nodes_mu_;
  mutable std::shared_ptr<const Nodes> nodes_;
  mutable int64_t nodes_at_ms_ = 0;
  std::chrono::milliseconds directory_max_age_{100};
  Refresh refresh_;
  std::function<bool()> lease_;
  std::string cluster_;
  metadata::WatchId isolation_watch_ = 0;
  std::atomic<uint64_t> isolation_reads_{0};
  std::chrono::milliseconds failover_after_{0};
  runtime::Reactor* reactor_ = nullptr;
  std::unique_ptr<runtime::Timer> pass_timer_;  // on reactor_
  Unloader unloader_;
  RemoteCalls* calls_ = nullptr;
  metadata::WatchId watch_ = 0;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Assignment> owners_;  // bundle key -> owner
  std::shared_ptr<const IsolationRules> isolation_ = std::make_shared<IsolationRules>();
  std::unordered_set<std::string> releasing_;           // bundle keys being handed over by this node
  std::set<std::string> taking_over_;                   // bundle keys with a move under way from here
  mutable std::unordered_map<uint64_t, int64_t> dead_since_ms_;  // owners seen dead, when first seen so
};

}  // namespace magnetar::broker
