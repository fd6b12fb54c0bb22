// GroupCoordinator: Kafka consumer groups on this node (every group's
// coordinator is this node).
//
// A group moves Empty -> PreparingRebalance -> CompletingRebalance ->
// Stable. A join (or a leave, or a member whose session timed out) starts a
// rebalance; it completes once every known member has joined again (members
// that do not within the rebalance timeout are dropped), with a new
// generation: the leader's JoinGroup answer lists the members and their
// protocol metadata, the leader computes the assignment and sends it in
// SyncGroup, and the coordinator hands each member its part. The broker
// never reads assignments.
//
// A group holds at most max_members members: a new member past that is
// answered GROUP_MAX_SIZE_REACHED (Kafka's group.max.size, unlimited by
// default there; bounded here so one client cannot grow a group without
// end).
//
// Threads: a group lives on the home reactor of its name's hash, like a
// topic. Every method may be called from any thread; its callback runs on
// the group's reactor (callers route answers back to their connection).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "protocol/kafka/errors.h"
#include "protocol/kafka/server/exact_offsets.h"
#include "runtime/runtime.h"
#include "runtime/timer.h"

namespace magnetar::protocol::kafka {

// (protocol name or member id, opaque bytes)
using NamedBytes = std::pair<std::string, std::string>;

struct JoinArgs {
  std::string group;
  std::string member_id;  // "" on a first join
  std::string client_id;
  std::string client_host;
  int32_t session_timeout_ms = 0;
  int32_t rebalance_timeout_ms = -1;  // -1: the session timeout
  std::string protocol_type;
  std::vector<NamedBytes> protocols;  // in the member's preference order
};

struct JoinResult {
  ErrorCode error = kNone;
  int32_t generation = -1;
  std::string protocol_name;
  std::string leader;
  std::string member_id;
  std::vector<NamedBytes> members;  // the leader's answer only
};

struct MemberDescription {
  std::string member_id;
  std::string client_id;
  std::string client_host;
  std::string metadata;    // for the group's protocol
  std::string assignment;  // once Stable
};

struct GroupDescription {
  std::string group;
  std::string state;  // Kafka's names; "Dead" for a group this node does not have
  std::string protocol_type;
  std::string protocol_name;
  std::vector<MemberDescription> members;
};

struct GroupListing {
  std::string group;
  std::string protocol_type;
  std::string state;  // Kafka's name of its state
};

struct GroupCoordinatorOptions {
  size_t max_members = 1000;  // per group
  // The exact offsets remembered (exact_offsets.h): per group, and over all.
  size_t max_exact_offsets_per_group = 10000;
  size_t max_exact_offsets = 100000;
};

class GroupCoordinator {
 public:
  explicit GroupCoordinator(runtime::Runtime& runtime, GroupCoordinatorOptions options = {});
  ~GroupCoordinator();
  // Cancels the deadline timers, on their reactors. Main thread, before the
  // reactors stop.
  void stop();

  void join(JoinArgs args, std::function<void(JoinResult)> done);
  // `assignments` are read from the leader only.
  void sync(std::string group, int32_t generation, std::string member_id, std::vector<NamedBytes> assignments,
            std::function<void(ErrorCode, std::string)> done);
  void heartbeat(std::string group, int32_t generation, std::string member_id, std::function<void(ErrorCode)> done);
  void leave(std::string group, std::string member_id, std::function<void(ErrorCode)> done);
  // Whether a commit by (generation, member_id) may go ahead: generation -1
  // is a commit from outside the group protocol (assign()), always allowed.
  void check_commit(std::string group, int32_t generation, std::string member_id,
                    std::function<void(ErrorCode)> done);
  void describe(std::string group, std::function<void(GroupDescription)> done);
  // Every group with members, from every reactor; `done` runs on some reactor.
  void list(std::function<void(std::vector<GroupListing>)> done);

  // Committed offsets as the client sent them. The cursor keeps whole
  // entries only, so a commit inside a batch entry is remembered here
  // (memory only, bounded: exact_offsets.h) together with the entry-aligned
  // offset the cursor holds; OffsetFetch returns the exact offset while the
  // cursor still says the same. `group` is the coordinator's key. Any thread.
  void remember_offset(const std::string& group, const std::string& topic, int32_t partition, int64_t exact,
                       int64_t aligned);
  // The exact offset remembered for the partition whose aligned offset is
  // `aligned`, else `aligned`.
  int64_t exact_offset(const std::string& group, const std::string& topic, int32_t partition,
                       int64_t aligned) const;
  // The group's offsets were deleted: forgets its exact offsets.
  void forget_offsets(const std::string& group);

 private:
  struct Group;
  struct Shard;
  Shard& shard_for(const std::string& group);
  // Runs `fn` with the group (created Empty when missing) on its reactor.
  void with_group(const std::string& group, std::function<void(Group&)> fn);
  void tick(Shard& shard);

  runtime::Runtime& runtime_;
  const GroupCoordinatorOptions options_;
  std::vector<std::unique_ptr<Shard>> shards_;  // one per reactor, touched only there
  mutable std::mutex offsets_mu_;
  ExactOffsets offsets_;  // guarded by offsets_mu_
};

}  // namespace magnetar::protocol::kafka
