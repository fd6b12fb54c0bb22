#include "protocol/kafka/server/group_coordinator.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>

#include "common/logging.h"
#include "common/metrics.h"

namespace magnetar::protocol::kafka {

// A group's state in Kafka's rebalance protocol (a member of Group, so not
// in the anonymous namespace).
enum class GroupState { kEmpty, kPreparingRebalance, kCompletingRebalance, kStable };

namespace {

// Kafka's names of the states (DescribeGroups, ListGroups v4+).
std::string group_state_name(GroupState s) {
  static constexpr const char* kStateNames[] = {"Empty", "PreparingRebalance", "CompletingRebalance", "Stable"};
  return kStateNames[static_cast<int>(s)];
}

using Clock = std::chrono::steady_clock;

// How often session and rebalance deadlines are looked at.
constexpr std::chrono::milliseconds kTickInterval{100};
// The session timeouts accepted (Kafka's broker defaults are 6 s to 30 min;
// tests use shorter ones).
constexpr int32_t kMinSessionTimeoutMs = 1000;
constexpr int32_t kMaxSessionTimeoutMs = 30 * 60 * 1000;

std::atomic<uint64_t> next_member{1};

common::Counter& exact_offsets_evicted_metric() {
  static common::Counter& evicted = common::MetricsRegistry::global().counter(
      "magnetar_kafka_exact_offsets_evicted_total",
      "Exact committed offsets (commits inside a batch) forgotten at their bound; the group resumes those "
      "partitions at the batch's first offset");
  return evicted;
}

}  // namespace

struct GroupCoordinator::Group {
  struct Member {
    std::string id;
    std::string client_id;
    std::string client_host;
    int32_t session_timeout_ms = 0;
    int32_t rebalance_timeout_ms = 0;
    std::vector<NamedBytes> protocols;
    std::string assignment;
    Clock::time_point last_seen;
    std::function<void(JoinResult)> pending_join;
    std::function<void(ErrorCode, std::string)> pending_sync;
  };

  std::string name;
  GroupState state = GroupState::kEmpty;
  int32_t generation = 0;
  std::string protocol_type;
  std::string protocol_name;
  std::string leader;
  std::map<std::string, Member> members;  // by member id
  Clock::time_point rebalance_deadline;

  bool member_alive(const Member& m, Clock::time_point now) const {
    if (m.pending_join || m.pending_sync) return true;
    return now - m.last_seen <= std::chrono::milliseconds(m.session_timeout_ms);
  }

  // A protocol every member offers: the first of the leader's list.
  std::string common_protocol() const {
    if (members.empty()) return "";
    const Member& first = members.count(leader) ? members.at(leader) : members.begin()->second;
    for (const auto& [name, meta] : first.protocols) {
      bool everyone = std::all_of(members.begin(), members.end(), [&](const auto& kv) {
        return std::any_of(kv.second.protocols.begin(), kv.second.protocols.end(),
                           [&](const NamedBytes& p) { return p.first == name; });
      });
      if (everyone) return name;
    }
    return "";
  }

  void fail_pending_syncs(ErrorCode e) {
    for (auto& [id, m] : members) {
      if (m.pending_sync) std::exchange(m.pending_sync, nullptr)(e, "");
    }
  }

  void prepare_rebalance(Clock::time_point now) {
    if (state == GroupState::kCompletingRebalance) fail_pending_syncs(kRebalanceInProgress);
    if (state != GroupState::kPreparingRebalance) {
      int32_t longest = 0;
      for (const auto& [id, m] : members) longest = std::max(longest, m.rebalance_timeout_ms);
      rebalance_deadline = now + std::chrono::milliseconds(longest);
    }
    state = members.empty() ? GroupState::kEmpty : GroupState::kPreparingRebalance;
    if (state == GroupState::kEmpty) {
      generation++;
      leader.clear();
      protocol_name.clear();
    }
  }

  bool everyone_joined() const {
    return std::all_of(members.begin(), members.end(), [](const auto& kv) { return bool(kv.second.pending_join); });
  }

  // Drops the members that did not join again, then starts the next
  // generation and answers every join.
  void complete_join() {
    for (auto it = members.begin(); it != members.end();) {
      it = it->second.pending_join ? std::next(it) : members.erase(it);
    }
    generation++;
    if (members.empty()) {
      state = GroupState::kEmpty;
      leader.clear();
      return;
    }
    if (!members.count(leader)) leader = members.begin()->first;
    protocol_name = common_protocol();
    state = GroupState::kCompletingRebalance;
    auto now = Clock::now();
    for (auto& [id, m] : members) {
      JoinResult r;
      r.generation = generation;
      r.protocol_name = protocol_name;
      r.leader = leader;
      r.member_id = id;
      if (id == leader) {
        for (const auto& [other_id, other] : members) {
          for (const auto& [name, meta] : other.protocols) {
            if (name == protocol_name) r.members.emplace_back(other_id, meta);
          }
        }
      }
      m.last_seen = now;
      m.assignment.clear();
      std::exchange(m.pending_join, nullptr)(std::move(r));
    }
  }
};

struct GroupCoordinator::Shard {
  runtime::Reactor* reactor = nullptr;
  std::map<std::string, std::unique_ptr<Group>> groups;
  std::unique_ptr<runtime::Timer> timer;  // created on first use, on the reactor
};

GroupCoordinator::GroupCoordinator(runtime::Runtime& runtime, GroupCoordinatorOptions options)
    : runtime_(runtime),
      options_(options),
      offsets_(options.max_exact_offsets_per_group, options.max_exact_offsets) {
  for (size_t i = 0; i < runtime.size(); ++i) {
    auto shard = std::make_unique<Shard>();
    shard->reactor = &runtime.reactor(i);
    shards_.push_back(std::move(shard));
  }
}

GroupCoordinator::~GroupCoordinator() {
  // Timers belong to their reactors; by now those have stopped, and a timer
  // must not be touched from another thread: they are left to the process.
  for (auto& s : shards_) {
    if (s->timer) (void)s->timer.release();
    for (auto& [name, g] : s->groups) {
      for (auto& [id, m] : g->members) {
        m.pending_join = nullptr;
        m.pending_sync = nullptr;
      }
    }
  }
}

void GroupCoordinator::stop() {
  for (auto& s : shards_) {
    Shard* shard = s.get();
    shard->reactor->post_or_wait([shard]() { shard->timer.reset(); });
  }
}

GroupCoordinator::Shard& GroupCoordinator::shard_for(const std::string& group) {
  return *shards_[std::hash<std::string>{}(group) % shards_.size()];
}

void GroupCoordinator::with_group(const std::string& group, std::function<void(Group&)> fn) {
  Shard& shard = shard_for(group);
  auto task = [this, &shard, group, fn = std::move(fn)]() {
    auto& g = shard.groups[group];
    if (!g) {
      g = std::make_unique<Group>();
      g->name = group;
    }
    if (!shard.timer) {
      shard.timer = std::make_unique<runtime::Timer>(*shard.reactor);
      shard.timer->every(kTickInterval, [this, &shard]() { tick(shard); });
    }
    fn(*g);
  };
  if (shard.reactor->is_on_thread()) return task();
  if (!shard.reactor->post_reliably(std::move(task))) {
    MLOG_DEBUG("kafka: group {} request dropped, its reactor is stopping", group);
  }
}

void GroupCoordinator::tick(Shard& shard) {
  auto now = Clock::now();
  for (auto& [name, g] : shard.groups) {
    bool expired = false;
    for (auto it = g->members.begin(); it != g->members.end();) {
      if (g->member_alive(it->second, now)) {
        ++it;
        continue;
      }
      MLOG_INFO("kafka group {}: member {} missed its session timeout", name, it->first);
      it = g->members.erase(it);
      expired = true;
    }
    if (expired) g->prepare_rebalance(now);
    if (g->state == GroupState::kPreparingRebalance && (g->everyone_joined() || now >= g->rebalance_deadline)) {
      g->complete_join();
    }
  }
  // A group without members is forgotten; its committed offsets stay in
  // the subscriptions.
  std::erase_if(shard.groups, [](const auto& kv) { return kv.second->members.empty(); });
}

void GroupCoordinator::join(JoinArgs args, std::function<void(JoinResult)> done) {
  if (args.group.empty()) {
    JoinResult r;
    r.error = kInvalidGroupId;
    r.member_id = args.member_id;
    return done(std::move(r));
  }
  std::string group = args.group;
  with_group(group, [args = std::move(args), done = std::move(done), max_members = options_.max_members](
                        Group& g) mutable {
    auto fail = [&](ErrorCode e) {
      JoinResult r;
      r.error = e;
      r.member_id = args.member_id;
      done(std::move(r));
    };
    if (args.session_timeout_ms < kMinSessionTimeoutMs || args.session_timeout_ms > kMaxSessionTimeoutMs) {
      return fail(kInvalidSessionTimeout);
    }
    if (args.protocol_type.empty() || args.protocols.empty()) return fail(kInconsistentGroupProtocol);
    if (!g.members.empty() && args.protocol_type != g.protocol_type) return fail(kInconsistentGroupProtocol);
    if (!args.member_id.empty() && !g.members.count(args.member_id)) return fail(kUnknownMemberId);
    if (args.member_id.empty() && g.members.size() >= max_members) {
      MLOG_INFO("kafka group {}: a new member is refused, the group has {} members (its bound)", g.name, max_members);
      return fail(kGroupMaxSizeReached);
    }
    if (!g.members.empty()) {
      // Some protocol must stay common to everyone.
      bool shared = false;
      for (const auto& [name, meta] : args.protocols) {
        shared = shared || std::all_of(g.members.begin(), g.members.end(), [&](const auto& kv) {
                   return kv.first == args.member_id ||
                          std::any_of(kv.second.protocols.begin(), kv.second.protocols.end(),
                                      [&](const NamedBytes& p) { return p.first == name; });
                 });
      }
      if (!shared) return fail(kInconsistentGroupProtocol);
    }
    std::string id = args.member_id;
    if (id.empty()) {
      id = fmt::format("{}-{}", args.client_id.empty() ? "member" : args.client_id,
                       next_member.fetch_add(1, std::memory_order_relaxed));
    }
    auto now = Clock::now();
    auto& m = g.members[id];
    if (m.pending_join) {
      JoinResult r;
      r.error = kRebalanceInProgress;  // superseded by this join
      r.member_id = id;
      std::exchange(m.pending_join, nullptr)(std::move(r));
    }
    m.id = id;
    m.client_id = args.client_id;
    m.client_host = args.client_host;
    m.session_timeout_ms = args.session_timeout_ms;
    m.rebalance_timeout_ms = args.rebalance_timeout_ms > 0 ? args.rebalance_timeout_ms : args.session_timeout_ms;
    m.protocols = std::move(args.protocols);
    m.last_seen = now;
    m.pending_join = std::move(done);
    g.protocol_type = args.protocol_type;
    g.prepare_rebalance(now);
    if (g.everyone_joined()) g.complete_join();
  });
}

void GroupCoordinator::sync(std::string group, int32_t generation, std::string member_id,
                            std::vector<NamedBytes> assignments, std::function<void(ErrorCode, std::string)> done) {
  if (group.empty()) return done(kInvalidGroupId, "");
  with_group(group, [generation, member_id = std::move(member_id), assignments = std::move(assignments),
                     done = std::move(done)](Group& g) mutable {
    auto it = g.members.find(member_id);
    if (it == g.members.end()) return done(kUnknownMemberId, "");
    if (generation != g.generation) return done(kIllegalGeneration, "");
    if (g.state == GroupState::kPreparingRebalance) return done(kRebalanceInProgress, "");
    it->second.last_seen = Clock::now();
    if (g.state == GroupState::kStable) return done(kNone, it->second.assignment);
    // CompletingRebalance: wait for the leader's assignment.
    if (it->second.pending_sync) std::exchange(it->second.pending_sync, nullptr)(kRebalanceInProgress, "");
    it->second.pending_sync = std::move(done);
    if (member_id != g.leader) return;
    for (auto& [id, m] : g.members) m.assignment.clear();
    for (auto& [id, bytes] : assignments) {
      auto target = g.members.find(id);
      if (target != g.members.end()) target->second.assignment = std::move(bytes);
    }
    g.state = GroupState::kStable;
    auto now = Clock::now();
    for (auto& [id, m] : g.members) {
      m.last_seen = now;
      if (m.pending_sync) std::exchange(m.pending_sync, nullptr)(kNone, m.assignment);
    }
  });
}

void GroupCoordinator::heartbeat(std::string group, int32_t generation, std::string member_id,
                                 std::function<void(ErrorCode)> done) {
  if (group.empty()) return done(kInvalidGroupId);
  with_group(group, [generation, member_id = std::move(member_id), done = std::move(done)](Group& g) {
    auto it = g.members.find(member_id);
    if (it == g.members.end()) return done(kUnknownMemberId);
    it->second.last_seen = Clock::now();
    if (g.state == GroupState::kPreparingRebalance) return done(kRebalanceInProgress);
    if (generation != g.generation) return done(kIllegalGeneration);
    done(kNone);
  });
}

void GroupCoordinator::leave(std::string group, std::string member_id, std::function<void(ErrorCode)> done) {
  if (group.empty()) return done(kInvalidGroupId);
  with_group(group, [member_id = std::move(member_id), done = std::move(done)](Group& g) {
    auto it = g.members.find(member_id);
    if (it == g.members.end()) return done(kUnknownMemberId);
    if (it->second.pending_join) {
      JoinResult r;
      r.error = kUnknownMemberId;
      r.member_id = member_id;
      std::exchange(it->second.pending_join, nullptr)(std::move(r));
    }
    if (it->second.pending_sync) std::exchange(it->second.pending_sync, nullptr)(kUnknownMemberId, "");
    g.members.erase(it);
    auto now = Clock::now();
    g.prepare_rebalance(now);
    if (g.state == GroupState::kPreparingRebalance && g.everyone_joined()) g.complete_join();
    done(kNone);
  });
}

void GroupCoordinator::check_commit(std::string group, int32_t generation, std::string member_id,
                                    std::function<void(ErrorCode)> done) {
  if (group.empty()) return done(kInvalidGroupId);
  if (generation < 0) return done(kNone);
  with_group(group, [generation, member_id = std::move(member_id), done = std::move(done)](Group& g) {
    auto it = g.members.find(member_id);
    if (it == g.members.end()) return done(kUnknownMemberId);
    if (generation != g.generation) return done(kIllegalGeneration);
    if (g.state == GroupState::kPreparingRebalance) return done(kRebalanceInProgress);
    it->second.last_seen = Clock::now();
    done(kNone);
  });
}

void GroupCoordinator::describe(std::string group, std::function<void(GroupDescription)> done) {
  if (group.empty()) return done(GroupDescription{"", "Dead", "", "", {}});
  with_group(group, [done = std::move(done)](Group& g) {
    GroupDescription d;
    d.group = g.name;
    d.state = g.members.empty() ? "Dead" : group_state_name(g.state);
    d.protocol_type = g.protocol_type;
    d.protocol_name = g.protocol_name;
    for (const auto& [id, m] : g.members) {
      MemberDescription md;
      md.member_id = id;
      md.client_id = m.client_id;
      md.client_host = m.client_host;
      for (const auto& [name, meta] : m.protocols) {
        if (name == g.protocol_name) md.metadata = meta;
      }
      if (g.state == GroupState::kStable) md.assignment = m.assignment;
      d.members.push_back(std::move(md));
    }
    done(std::move(d));
  });
}

void GroupCoordinator::list(std::function<void(std::vector<GroupListing>)> done) {
  struct Gather {
    std::mutex mu;
    std::vector<GroupListing> groups;
    size_t left = 0;
    std::function<void(std::vector<GroupListing>)> done;
  };
  auto gather = std::make_shared<Gather>();
  gather->left = shards_.size();
  gather->done = std::move(done);
  for (auto& s : shards_) {
    Shard* shard = s.get();
    auto task = [shard, gather]() {
      std::vector<GroupListing> mine;
      for (const auto& [name, g] : shard->groups) {
        if (!g->members.empty()) mine.push_back({name, g->protocol_type, group_state_name(g->state)});
      }
      std::unique_lock lock(gather->mu);
      gather->groups.insert(gather->groups.end(), mine.begin(), mine.end());
      if (--gather->left == 0) {
        auto all = std::move(gather->groups);
        lock.unlock();
        gather->done(std::move(all));
      }
    };
    if (shard->reactor->is_on_thread()) {
      task();
    } else if (!shard->reactor->post_reliably(task)) {
      MLOG_DEBUG("kafka: group listing dropped, a reactor is stopping");
    }
  }
}

namespace {

std::string partition_key(const std::string& topic, int32_t partition) {
  return fmt::format("{}\n{}", topic, partition);
}

}  // namespace

void GroupCoordinator::remember_offset(const std::string& group, const std::string& topic, int32_t partition,
                                       int64_t exact, int64_t aligned) {
  std::lock_guard lock(offsets_mu_);
  const uint64_t evicted = offsets_.evicted();
  offsets_.remember(group, partition_key(topic, partition), exact, aligned);
  if (offsets_.evicted() > evicted) exact_offsets_evicted_metric().inc(offsets_.evicted() - evicted);
}

int64_t GroupCoordinator::exact_offset(const std::string& group, const std::string& topic, int32_t partition,
                                       int64_t aligned) const {
  std::lock_guard lock(offsets_mu_);
  return offsets_.exact(group, partition_key(topic, partition), aligned);
}

void GroupCoordinator::forget_offsets(const std::string& group) {
  std::lock_guard lock(offsets_mu_);
  offsets_.forget_group(group);
}

}  // namespace magnetar::protocol::kafka
