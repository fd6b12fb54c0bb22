// ClusterNode: this node as a member of a cluster, and the replicated
// metadata store its components use.
//
// On disk, under <data-dir>/cluster/:
//   node-id   this member's consensus server id, made at its first start and
//             never changed (the other members know it by it)
//   raft/     the consensus log and snapshots (libraft's raft_uv)
//   state/    the metadata key space as of the last applied entry. Derived
//             from raft/: it is rebuilt from the last snapshot and the log at
//             every start.
//
// Starting (start(), blocking, main thread):
// - A node with a log takes part in its cluster again: no --join needed.
// - A node with no log and no --join founds a new cluster of one voter. When
//   <data-dir>/metadata holds a standalone node's metadata, it becomes the
//   cluster's first entry and the directory is renamed metadata.standalone:
//   a laptop's node grows into the first member, with everything it held.
// - A node with no log and --join asks the seeds (any member; one that is not
//   the leader names it) to add it, then catches up from the leader.
// start() returns once this member knows a leader and has applied the log
// up to where it was when it started, or fails after start_timeout_ms.
//
// Membership (on the leader, every second): every member tells the leader it
// is alive. The cluster keeps min(3, members) voters, 5 from 5 members up;
// the other members are standbys that hold the log and apply it (local
// watches) without voting. A voter silent for kDeadAfterMs is replaced by a
// live standby; a joining member becomes a voter while voters are short.
//
// Threads: the consensus, the links, the RPC server and client run on the
// node's own "cluster" reactor. start()/stop() from the main thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/cluster_secret.h"
#include "cluster/consensus.h"
#include "common/result.h"
#include "metadata/store.h"
#include "runtime/component.h"

struct raft_io;

namespace magnetar::runtime {
class Reactor;
class Timer;
}

namespace magnetar::cluster {

class ClusterStore;
class LinkConnector;
class LinkListener;
class RaftConsensus;
class RaftLinkTransport;
class RaftStore;
class RpcClient;
class RpcServer;
class StoreMachine;

class ClusterNode final : public runtime::Component {
 public:
  struct Options {
    std::string data_dir;         // the node's data directory
    std::string bind = "127.0.0.1";
    std::string advertised_host;  // how other members reach this node
    int port = 6660;              // the cluster port (0: a free one)
    std::vector<std::string> join;  // seeds, host:port
    std::string secret_file;
    ConsensusOptions consensus;
    int64_t start_timeout_ms = 60000;
  };

  // A member as this node sees it.
  struct MemberInfo {
    ServerId id = 0;
    std::string address;
    Role role = Role::kVoter;
    bool leader = false;
    bool alive = false;  // heard from recently, as the leader knows it
    LogIndex applied_index = 0;  // known for this node only
  };

  static constexpr int64_t kKeepAliveMs = 1000;
  static constexpr int64_t kDeadAfterMs = 5000;
  // A member's lease: how long after the cluster last heard from it (a
  // keepalive the leader answered; for the leader, a majority of voters'
  // keepalives) it may still write metadata. Measured on the member's own
  // monotonic clock from when it sent, so a paused process wakes with its
  // lease lapsed.
  static constexpr int64_t kLeaseMs = kDeadAfterMs;
  // How often a renewal waiting for this member to apply the leader's entry looks again.
  static constexpr int64_t kLeasePollMs = 10;

  explicit ClusterNode(Options options);
  ~ClusterNode() override;

  std::string_view name() const override { return "cluster"; }
  common::Status start() override;
  void stop() override;

  // The replicated store. REQUIRES: start() succeeded.
  metadata::Store& store();
  ServerId id() const { return id_; }
  // Any thread: whether this member's lease is current.
  bool lease_valid() const;
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  // Any thread: the members and their state, as this node knows them.
  std::vector<MemberInfo> members();

  // Any thread: calls `method` on member `node` over the cluster port;
  // `done` runs on the cluster reactor (Unavailable for an unknown member).
  void call(ServerId node, uint16_t method, std::string payload,
            std::function<void(common::Result<std::string>)> done, unsigned timeout_ms = 10000);
  // The cluster reactor (calls' answers and handlers run on it).
  runtime::Reactor& reactor() { return *reactor_; }
  // Any thread: answers `method` from other members with `handler`, run on
  // the cluster reactor; its reply may be given on any thread. REQUIRES:
  // start() succeeded.
  using Handler = std::function<void(std::string_view payload, std::function<void(std::string)> reply)>;
  void handle(uint16_t method, Handler handler);

 private:
  common::Status load_identity();
  common::Status open_on_reactor(bool has_log);
  common::Status join_cluster();
  common::Status import_standalone();
  common::Status wait_until(const std::function<bool()>& ready, const std::string& what);
  // Cluster reactor.
  void handle_join(ServerId id, const std::string& address, std::function<void(common::Status, std::string)> reply);
  void tick();
  // On a follower, when the leader answered the keepalive sent at
  // `sent_at`: extends the lease from then. A lease that lapsed is renewed
  // only once this member has applied the leader's entry `applied` too
  // (renew_once_applied), so that a member back from a cut or a pause never
  // acts on a view older than the cluster's (a bundle moved while it was
  // away is seen moved before it may name itself the owner again).
  void keepalive_answered(LogIndex applied, int64_t sent_at);
  // Renews the lapsed lease that waits, once its entry is applied here;
  // until then looks again every kLeasePollMs.
  void renew_once_applied();
  // On the leader, each tick: extends the lease by what a majority of voters said.
  void renew_leader_lease(int64_t now);
  // Publishes what members() answers.
  void refresh_members();
  // Leading: registers the leadership once per term (leading_since_ms_,
  // last_seen_ms_ afresh).
  void note_leading(int64_t now);
  // Just stopped leading: the members it saw alive as leader are its view
  // until the new leader answers (leader_says_alive_).
  void keep_view_after_leading(int64_t now);
  // Leader only: whether member `id` counts as alive at `now` (heard from
  // within kDeadAfterMs, or not yet heard since this node began leading and
  // leading for less than that).
  bool seen_alive(ServerId id, int64_t now) const;
  // Leader only (or at the step-down, before leading_since_ms_ is cleared):
  // when member `id` was last heard from (the start of this leadership when
  // not since).
  int64_t seen_since(ServerId id, int64_t now) const;
  void reconcile_membership();
  // Main thread, stopping: a leader hands leadership to the most up-to-date
  // voter, so metadata writes go on without waiting for an election.
  void hand_over_leadership();

  const Options options_;
  std::string dir_;  // <data-dir>/cluster
  ServerId id_ = 0;
  std::string address_;
  int port_ = 0;
  std::optional<ClusterSecret> secret_;

  std::unique_ptr<runtime::Reactor> reactor_;
  std::unique_ptr<StoreMachine> machine_;
  std::unique_ptr<LinkListener> listener_;
  std::unique_ptr<LinkConnector> connector_;
  std::unique_ptr<RaftLinkTransport> transport_;
  std::unique_ptr<raft_io> io_;
  bool io_ready_ = false;
  std::unique_ptr<RaftConsensus> consensus_;
  std::unique_ptr<RaftStore> raft_store_;
  std::unique_ptr<RpcServer> rpc_server_;
  std::unique_ptr<RpcClient> rpc_client_;
  std::unique_ptr<ClusterStore> store_;
  std::unique_ptr<runtime::Timer> ticker_;
  std::unique_ptr<runtime::Timer> lease_poll_;  // while a renewal waits for this member to apply
  bool started_ = false;

  // Cluster reactor: when each member was last heard from (leader's view),
  // and since when this node leads (members get that long before they count
  // as dead).
  std::map<ServerId, int64_t> last_seen_ms_;
  int64_t leading_since_ms_ = 0;
  uint64_t leading_term_ = 0;  // the term leading_since_ms_ began in
  bool changing_membership_ = false;
  // A member's view of who is alive: the leader's answer to its last keepalive.
  std::vector<ServerId> leader_says_alive_;
  int64_t leader_said_at_ms_ = 0;
  std::atomic<int64_t> lease_until_ms_{0};
  struct PendingRenewal {
    LogIndex applied = 0;
    int64_t sent_at = 0;
  };
  std::optional<PendingRenewal> lease_waits_for_;  // cluster reactor
  std::vector<MemberInfo> members_snapshot_;  // guarded by members_mu_
  std::mutex members_mu_;
};

}  // namespace magnetar::cluster
