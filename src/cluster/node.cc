#include "cluster/node.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <thread>
#include <utility>

#include "cluster/cluster_store.h"
#include "cluster/libraft.h"
#include "cluster/link.h"
#include "cluster/raft_consensus.h"
#include "cluster/raft_store.h"
#include "cluster/rpc.h"
#include "cluster/rpc_generated.h"
#include "cluster/rpc_records.h"
#include "cluster/store_machine.h"
#include "common/clock.h"
#include "common/logging.h"
#include "metadata/store_state.h"
#include "metadata/write_op.h"
#include "runtime/reactor.h"
#include "runtime/timer.h"

extern "C" {
#include <raft/uv.h>
}

namespace magnetar::cluster {

using common::ErrorCode;
using common::Result;
using common::Status;
namespace fs = std::filesystem;

namespace {

std::string join_reply_bytes(const Status& st, const std::string& leader) {
  flatbuffers::FlatBufferBuilder b(128);
  auto message = b.CreateString(st.message());
  auto leader_address = b.CreateString(leader);
  fb::JoinReplyBuilder r(b);
  r.add_code(static_cast<uint8_t>(st.code()));
  r.add_message(message);
  r.add_leader(leader_address);
  b.Finish(r.Finish());
  return record_bytes(b);
}

bool dir_has_entries(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(dir, ec) && fs::directory_iterator(dir, ec) != fs::directory_iterator();
}

}  // namespace

ClusterNode::ClusterNode(Options options) : options_(std::move(options)), dir_(options_.data_dir + "/cluster") {}

ClusterNode::~ClusterNode() { stop(); }

metadata::Store& ClusterNode::store() { return *store_; }

Status ClusterNode::load_identity() {
  std::error_code ec;
  fs::create_directories(dir_ + "/raft", ec);
  if (ec) return Status::io_error("cannot create " + dir_ + "/raft: " + ec.message());
  std::string path = dir_ + "/node-id";
  std::ifstream in(path);
  if (in) {
    std::string text;
    in >> text;
    try {
      id_ = std::stoull(text);
    } catch (...) {
      id_ = 0;
    }
    if (id_ == 0) return Status::corruption(path + " does not hold a node id (a positive integer)");
    return Status::ok();
  }
  std::random_device random;
  std::mt19937_64 gen((static_cast<uint64_t>(random()) << 32) ^ random() ^ common::monotonic_ms());
  // Below 2^53, so JSON readers of the admin API see it exactly.
  do {
    id_ = gen() & ((uint64_t{1} << 53) - 1);
  } while (id_ == 0);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << id_ << "\n";
    if (!out.flush()) return Status::io_error("cannot write " + tmp);
  }
  fs::rename(tmp, path, ec);
  if (ec) return Status::io_error("cannot rename " + tmp + ": " + ec.message());
  MLOG_INFO("cluster: this node's id is {} (kept in {})", id_, path);
  return Status::ok();
}

Status ClusterNode::start() {
  if (options_.secret_file.empty()) {
    return Status::invalid_argument(
        "a cluster member needs --cluster-secret-file (make one with: magnetar cluster create-secret --output FILE)");
  }
  auto secret = ClusterSecret::load(options_.secret_file);
  if (!secret.is_ok()) return secret.status();
  secret_ = std::move(*secret);
  MAGNETAR_RETURN_IF_ERROR(load_identity());
  bool has_log = dir_has_entries(dir_ + "/raft");
  if (!has_log && !options_.join.empty() && dir_has_entries(options_.data_dir + "/metadata")) {
    return Status::failed_precondition(
        options_.data_dir + " holds a standalone node's data: it can found a cluster (start it without --join), "
        "not join one; give a joining node an empty data directory");
  }
  if (has_log && !options_.join.empty()) {
    MLOG_INFO("cluster: this node is a member already; --join is ignored");
  }
  // The state is derived from the log: rebuild it from the snapshot and the log.
  std::error_code ec;
  fs::remove_all(dir_ + "/state", ec);
  if (ec) return Status::io_error("cannot clear " + dir_ + "/state: " + ec.message());
  machine_ = std::make_unique<StoreMachine>(dir_ + "/state");
  MAGNETAR_RETURN_IF_ERROR(machine_->open());

  reactor_ = std::make_unique<runtime::Reactor>(0, "cluster");
  reactor_->start();
  Status st = reactor_->run_sync([&]() { return open_on_reactor(has_log); });
  if (st.is_ok() && !has_log && !options_.join.empty()) st = join_cluster();
  if (st.is_ok()) {
    st = wait_until(
        [this]() {
          return reactor_->run_sync([this]() { return consensus_->leader().has_value(); });
        },
        "a leader");
  }
  if (st.is_ok()) {
    // Readable through the leader: this member is part of a working cluster.
    st = wait_until(
        [this]() {
          std::promise<bool> done;
          auto fut = done.get_future();
          store_->list_children("/", [&done](Result<std::vector<std::string>> r) { done.set_value(r.is_ok()); });
          return fut.get();
        },
        "the metadata store");
  }
  if (st.is_ok() && !has_log && options_.join.empty()) st = import_standalone();
  if (!st.is_ok()) {
    stop();
    return st;
  }
  started_ = true;
  reactor_->run_sync([this]() { tick(); });
  MLOG_INFO("cluster: member {} at {}, {} members", id_, address_, members().size());
  return Status::ok();
}

Status ClusterNode::open_on_reactor(bool has_log) {
  uv_loop_t* loop = reactor_->loop();
  std::string host = options_.advertised_host.empty() ? options_.bind : options_.advertised_host;
  // The listener binds first: with port 0 the address is known only then.
  listener_ = std::make_unique<LinkListener>(loop, *secret_, id_, host);
  MAGNETAR_RETURN_IF_ERROR(listener_->listen(options_.bind, options_.port));
  port_ = listener_->port();
  address_ = host + ":" + std::to_string(port_);
  connector_ = std::make_unique<LinkConnector>(loop, *secret_, id_, address_);
  transport_ = std::make_unique<RaftLinkTransport>(*listener_, *connector_);
  io_ = std::make_unique<raft_io>();
  std::string raft_dir = dir_ + "/raft";
  int rv = raft_uv_init(io_.get(), loop, raft_dir.c_str(), transport_->get());
  if (rv != 0) return Status::io_error("cannot open the consensus log in " + raft_dir + " (raft error " +
                                       std::to_string(rv) + ")");
  io_ready_ = true;
  raft_uv_set_segment_size(io_.get(), 1 << 20);
  raft_uv_set_connect_retry_delay(io_.get(), 200);
  auto consensus = RaftConsensus::create(io_.get(), id_, address_, *machine_, options_.consensus);
  if (!consensus.is_ok()) return consensus.status();
  consensus_ = std::move(*consensus);
  if (!has_log && options_.join.empty()) {
    MAGNETAR_RETURN_IF_ERROR(consensus_->bootstrap({Server{id_, address_, Role::kVoter}}));
    MLOG_INFO("cluster: founded a new cluster with this node as its first voter");
  }
  MAGNETAR_RETURN_IF_ERROR(consensus_->start());

  raft_store_ = std::make_unique<RaftStore>(*consensus_, *machine_);
  rpc_client_ = std::make_unique<RpcClient>(*reactor_, *connector_);
  store_ = std::make_unique<ClusterStore>(*reactor_, *consensus_, *machine_, *raft_store_, *rpc_client_,
                                          [this]() { return lease_valid(); });
  rpc_server_ = std::make_unique<RpcServer>();
  rpc_server_->handle(rpc::Method::kMetadata, [this](const Peer&, std::string_view payload, RpcServer::Reply reply) {
    auto call = decode_metadata_call(payload);
    if (!call.is_ok()) return reply(encode_metadata_answer(MetadataAnswer::of(call.status())));
    store_->run_local(*call, [reply](MetadataAnswer answer) { reply(encode_metadata_answer(answer)); });
  });
  rpc_server_->handle(rpc::Method::kJoin, [this](const Peer& peer, std::string_view payload, RpcServer::Reply reply) {
    const auto* call = verified_record<fb::JoinCall>(payload);
    if (call == nullptr) return reply(join_reply_bytes(Status::corruption("a join call fails verification"), ""));
    std::string address = call->address() ? call->address()->str() : "";
    if (call->id() != peer.id || address != peer.address) {
      return reply(join_reply_bytes(Status::permission_denied("a node may only ask to add itself"), ""));
    }
    handle_join(call->id(), address, [reply](Status st, std::string leader) { reply(join_reply_bytes(st, leader)); });
  });
  rpc_server_->handle(rpc::Method::kKeepAlive, [this](const Peer& peer, std::string_view, RpcServer::Reply reply) {
    // Only the leader renews leases: an empty answer renews nothing.
    if (!consensus_->is_leader()) return reply(std::string());
    int64_t now = common::monotonic_ms();
    note_leading(now);
    last_seen_ms_[peer.id] = now;
    // The same view the leader's own member list shows: a member not heard
    // from since this node began leading is alive for the grace period (it
    // keeps alive with the old leader until it notices the new one).
    std::vector<uint64_t> alive;
    for (const Server& m : consensus_->members()) {
      if (seen_alive(m.id, now)) alive.push_back(m.id);
    }
    flatbuffers::FlatBufferBuilder b(64);
    auto ids = b.CreateVector(alive);
    fb::KeepAliveReplyBuilder r(b);
    r.add_alive(ids);
    r.add_applied(consensus_->applied_index());
    b.Finish(r.Finish());
    reply(record_bytes(b));
  });
  listener_->set_handler(Channel::kRpc, [this](const Peer& peer, uv_tcp_t* stream) { rpc_server_->accept(peer, stream); });
  ticker_ = std::make_unique<runtime::Timer>(*reactor_);
  lease_poll_ = std::make_unique<runtime::Timer>(*reactor_);
  ticker_->every(std::chrono::milliseconds(kKeepAliveMs), [this]() { tick(); });
  return Status::ok();
}

Status ClusterNode::wait_until(const std::function<bool()>& ready, const std::string& what) {
  int64_t deadline = common::monotonic_ms() + options_.start_timeout_ms;
  int64_t next_note = common::monotonic_ms() + 5000;
  while (!ready()) {
    int64_t now = common::monotonic_ms();
    if (now >= deadline) {
      return Status::timeout("cluster: no " + what + " within " + std::to_string(options_.start_timeout_ms / 1000) +
                             " s (are a majority of the voters up and reachable on their cluster ports?)");
    }
    if (now >= next_note) {
      MLOG_INFO("cluster: waiting for {}", what);
      next_note = now + 5000;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::ok();
}

Status ClusterNode::join_cluster() {
  int64_t deadline = common::monotonic_ms() + options_.start_timeout_ms;
  std::vector<std::string> targets = options_.join;
  size_t next = 0;
  Status last = Status::unavailable("no seed answered");
  while (common::monotonic_ms() < deadline) {
    std::string target = targets[next % targets.size()];
    std::promise<Result<std::string>> done;
    auto fut = done.get_future();
    flatbuffers::FlatBufferBuilder b(128);
    auto address = b.CreateString(address_);
    fb::JoinCallBuilder j(b);
    j.add_id(id_);
    j.add_address(address);
    b.Finish(j.Finish());
    std::string payload = record_bytes(b);
    reactor_->post_or_wait([&, target, payload]() mutable {
      rpc_client_->call(target, rpc::Method::kJoin, std::move(payload),
                        [&done](Result<std::string> reply) { done.set_value(std::move(reply)); });
    });
    Result<std::string> reply = fut.get();
    if (reply.is_ok()) {
      const fb::JoinReply* r = verified_record<fb::JoinReply>(*reply);
      if (r == nullptr) {
        last = Status::corruption("a malformed join reply from " + target);
      } else if (r->code() == 0) {
        MLOG_INFO("cluster: joined through {}", target);
        return Status::ok();
      } else {
        last = Status(static_cast<ErrorCode>(r->code()), r->message() ? r->message()->str() : "");
        std::string leader = r->leader() ? r->leader()->str() : "";
        if (last.code() == ErrorCode::kPermissionDenied) return last;
        if (!leader.empty() && leader != target) {
          targets.push_back(leader);  // ask the leader next
          next = targets.size() - 1;
          continue;
        }
      }
    } else {
      last = reply.status();
      if (last.code() == ErrorCode::kPermissionDenied) {
        return Status::permission_denied("cannot join through " + target + ": " + last.message() +
                                         " (does this node hold the cluster's secret?)");
      }
    }
    MLOG_INFO("cluster: joining through {}: {}; trying again", target, last.message());
    next++;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return Status::timeout("cluster: could not join through " + fmt::format("{}", fmt::join(options_.join, ", ")) +
                         ": " + last.message());
}

void ClusterNode::handle_join(ServerId id, const std::string& address,
                              std::function<void(Status, std::string)> reply) {
  if (!consensus_->is_leader()) {
    auto leader = consensus_->leader();
    return reply(Status::unavailable(leader ? "not the leader; the leader is at " + leader->address
                                            : "not the leader, and no leader is known yet"),
                 leader ? leader->address : "");
  }
  auto members = consensus_->members();
  size_t voters = 0;
  for (const Server& m : members) {
    if (m.id == id) {
      if (m.address == address) return reply(Status::ok(), "");
      return reply(Status::already_exists("server " + std::to_string(id) + " is a member at " + m.address), "");
    }
    if (m.role == Role::kVoter) voters++;
  }
  size_t target = members.size() + 1 >= 5 ? 5 : 3;
  Role role = voters < target ? Role::kVoter : Role::kStandby;
  if (changing_membership_) {
    return reply(Status::unavailable("another membership change is in progress; try again"), "");
  }
  last_seen_ms_[id] = common::monotonic_ms();
  changing_membership_ = true;
  Status st = consensus_->add_server(id, address, role, [this, id, address, role, reply](Status done) {
    changing_membership_ = false;
    if (done.is_ok()) MLOG_INFO("cluster: server {} at {} joined as a {}", id, address, role_name(role));
    reply(done, "");
  });
  if (!st.is_ok()) {
    changing_membership_ = false;
    reply(st, "");
  }
}

void ClusterNode::tick() {
  int64_t now = common::monotonic_ms();
  bool leading = consensus_->is_leader();
  if (leading) {
    note_leading(now);
  } else if (leading_since_ms_ != 0) {
    keep_view_after_leading(now);
    leading_since_ms_ = 0;
  }
  if (leading) renew_leader_lease(now);
  if (!leading) {
    if (auto leader = consensus_->leader()) {
      const int64_t sent_at = now;
      flatbuffers::FlatBufferBuilder b(32);
      fb::KeepAliveBuilder k(b);
      k.add_id(id_);
      b.Finish(k.Finish());
      rpc_client_->call(leader->address, rpc::Method::kKeepAlive,
                        record_bytes(b),
                        [this, sent_at](Result<std::string> reply) {
                          if (!reply.is_ok()) return;
                          const auto* r = verified_record<fb::KeepAliveReply>(*reply);
                          if (r == nullptr) return;
                          leader_says_alive_.clear();
                          if (r->alive()) leader_says_alive_.assign(r->alive()->begin(), r->alive()->end());
                          leader_said_at_ms_ = common::monotonic_ms();
                          // Who is alive is published before the lease: a
                          // member with a current lease never reads a view
                          // from before it had one (ownership moves the
                          // bundles of members it sees dead).
                          refresh_members();
                          keepalive_answered(r->applied(), sent_at);
                        },
                        static_cast<unsigned>(kKeepAliveMs * 2));
    }
  } else {
    reconcile_membership();
  }
  refresh_members();
}

void ClusterNode::keepalive_answered(LogIndex applied, int64_t sent_at) {
  const int64_t until = lease_until_ms_.load();
  if (until == 0 || common::monotonic_ms() < until) {
    // Current: nothing of this member's was moved without it (a member
    // moves another's bundles only once it is dead). Never held: what this
    // process knows of ownership it read from the leader since it started.
    lease_until_ms_ = std::max(until, sent_at + kLeaseMs);
    return;
  }
  // Lapsed: one answer waits at a time; a later one's entry comes after it,
  // so the one waiting is reached first.
  if (!lease_waits_for_) lease_waits_for_ = PendingRenewal{applied, sent_at};
  renew_once_applied();
}

void ClusterNode::renew_once_applied() {
  if (!lease_waits_for_) return;
  if (consensus_->applied_index() < lease_waits_for_->applied) {
    // Usually one entry behind (the leader tells its followers an entry is
    // committed with its next message): looked at again shortly.
    if (lease_poll_ && !lease_poll_->active()) {
      lease_poll_->every(std::chrono::milliseconds(kLeasePollMs), [this]() { renew_once_applied(); });
    }
    return;
  }
  lease_until_ms_ = std::max(lease_until_ms_.load(), lease_waits_for_->sent_at + kLeaseMs);
  lease_waits_for_.reset();
  if (lease_poll_) lease_poll_->cancel();
}

bool ClusterNode::lease_valid() const { return common::monotonic_ms() < lease_until_ms_.load(); }

void ClusterNode::renew_leader_lease(int64_t now) {
  // The voters heard from most recently, this one first: the lease runs from
  // when the last of a majority of them was heard.
  std::vector<int64_t> heard;
  for (const Server& m : consensus_->members()) {
    if (m.role != Role::kVoter) continue;
    if (m.id == id_) {
      heard.push_back(now);
    } else if (auto seen = last_seen_ms_.find(m.id); seen != last_seen_ms_.end()) {
      heard.push_back(seen->second);
    }
  }
  size_t voters = 0;
  for (const Server& m : consensus_->members()) voters += m.role == Role::kVoter ? 1 : 0;
  size_t majority = voters / 2 + 1;
  if (heard.size() < majority) return;
  std::sort(heard.begin(), heard.end(), std::greater<>());
  lease_until_ms_ = std::max(lease_until_ms_.load(), heard[majority - 1] + kLeaseMs);
}

void ClusterNode::note_leading(int64_t now) {
  const uint64_t term = consensus_->term();
  if (leading_since_ms_ != 0 && leading_term_ == term) return;
  // A new leadership (the first tick or keepalive in a term it leads, even
  // one it won back between two ticks): who is alive is counted from now,
  // not from what members sent in an earlier term, when they may have kept
  // alive with another leader.
  leading_since_ms_ = now;
  leading_term_ = term;
  last_seen_ms_.clear();
  // A majority just voted for it: that is hearing from them.
  lease_until_ms_ = std::max(lease_until_ms_.load(), now + kLeaseMs);
  MLOG_INFO("cluster: this node leads now (term {})", term);
}

void ClusterNode::keep_view_after_leading(int64_t now) {
  // Its lease, renewed while it led, is still current, and ownership moves
  // the bundles of the members its view calls dead. As a follower that view
  // is what a leader last said, which for a member that just led is an
  // answer from before it led: every other member would look dead, and their
  // bundles would move here. What it saw while leading stands instead, until
  // the new leader answers a keepalive, and no longer than it would have
  // stood had this node gone on leading: it expires with the oldest
  // keepalive it counts (a member killed just before the step-down is dead
  // 5 s after its last keepalive, not 5 s after the step-down).
  leader_says_alive_.clear();
  int64_t oldest = now;
  for (const Server& m : consensus_->members()) {
    if (!seen_alive(m.id, now)) continue;
    leader_says_alive_.push_back(m.id);
    if (m.id != id_) oldest = std::min(oldest, seen_since(m.id, now));
  }
  leader_said_at_ms_ = oldest;
  MLOG_INFO("cluster: this node no longer leads; {} members alive as it last saw them", leader_says_alive_.size());
}

int64_t ClusterNode::seen_since(ServerId id, int64_t now) const {
  auto seen = last_seen_ms_.find(id);
  // Leading since the last tick at most: the grace starts now.
  return seen != last_seen_ms_.end() ? seen->second : leading_since_ms_ != 0 ? leading_since_ms_ : now;
}

bool ClusterNode::seen_alive(ServerId id, int64_t now) const {
  return id == id_ || now - seen_since(id, now) < kDeadAfterMs;
}

void ClusterNode::refresh_members() {
  int64_t now = common::monotonic_ms();
  bool leading = consensus_->is_leader();
  std::vector<MemberInfo> info;
  auto leader = consensus_->leader();
  for (const Server& m : consensus_->members()) {
    MemberInfo mi{m.id, m.address, m.role, leader && leader->id == m.id, false};
    if (m.id == id_) {
      mi.alive = true;
      mi.applied_index = consensus_->applied_index();
    } else if (leading) {
      mi.alive = seen_alive(m.id, now);
    } else {
      // What the leader said at the last keepalive, while that is recent.
      bool fresh = now - leader_said_at_ms_ < kDeadAfterMs;
      mi.alive = fresh && std::find(leader_says_alive_.begin(), leader_says_alive_.end(), m.id) !=
                              leader_says_alive_.end();
    }
    info.push_back(std::move(mi));
  }
  std::lock_guard lock(members_mu_);
  members_snapshot_ = std::move(info);
}

void ClusterNode::reconcile_membership() {
  if (changing_membership_) return;
  int64_t now = common::monotonic_ms();
  auto alive = [&](ServerId id) { return seen_alive(id, now); };
  auto members = consensus_->members();
  size_t target = members.size() >= 5 ? 5 : std::min<size_t>(3, members.size());
  std::vector<ServerId> voters, dead_voters, live_standbys;
  for (const Server& m : members) {
    if (m.role == Role::kVoter) {
      voters.push_back(m.id);
      if (!alive(m.id)) dead_voters.push_back(m.id);
    } else if (m.role == Role::kStandby && alive(m.id)) {
      live_standbys.push_back(m.id);
    }
  }
  ServerId change = 0;
  Role role = Role::kVoter;
  if (voters.size() < target && !live_standbys.empty()) {
    change = live_standbys.front();
  } else if (!dead_voters.empty() && !live_standbys.empty()) {
    change = dead_voters.front();  // demoted now, a standby is promoted at the next tick
    role = Role::kStandby;
  }
  if (change == 0) return;
  changing_membership_ = true;
  MLOG_INFO("cluster: making server {} a {}", change, role_name(role));
  Status st = consensus_->assign_role(change, role, [this, change, role](Status done) {
    changing_membership_ = false;
    if (!done.is_ok()) MLOG_WARN("cluster: making server {} a {} failed: {}", change, role_name(role), done.message());
  });
  if (!st.is_ok()) {
    changing_membership_ = false;
    MLOG_WARN("cluster: making server {} a {} failed: {}", change, role_name(role), st.message());
  }
}

Status ClusterNode::import_standalone() {
  std::string old_dir = options_.data_dir + "/metadata";
  if (!dir_has_entries(old_dir)) return Status::ok();
  metadata::StoreState old(metadata::StoreState::Options{old_dir, true, nullptr});
  MAGNETAR_RETURN_IF_ERROR(old.open());
  Status st = old.remove_stale_ephemerals();
  Result<std::string> snapshot = st.is_ok() ? old.snapshot() : Result<std::string>(st);
  old.close();
  if (!snapshot.is_ok()) return snapshot.status();
  metadata::WriteOp op;
  op.kind = metadata::WriteOp::Kind::kImport;
  op.value = std::move(*snapshot);
  op.now_ms = common::wall_clock_ms();
  std::promise<Status> done;
  auto fut = done.get_future();
  reactor_->post_or_wait([&]() {
    std::string command = metadata::encode_write_op(op);
    machine_->begin_proposal();
    Status proposed = consensus_->propose(command, [&](Result<LogIndex> index) {
      auto outcome = machine_->end_proposal(index.is_ok() ? std::optional(*index) : std::nullopt);
      if (!index.is_ok()) return done.set_value(index.status());
      done.set_value(outcome && outcome->result.is_ok() ? Status::ok()
                                                         : Status::internal("the import was not applied"));
    });
    if (!proposed.is_ok()) {
      machine_->end_proposal(std::nullopt);
      done.set_value(proposed);
    }
  });
  MAGNETAR_RETURN_IF_ERROR(fut.get());
  std::error_code ec;
  fs::rename(old_dir, options_.data_dir + "/metadata.standalone", ec);
  if (ec) return Status::io_error("imported " + old_dir + " but cannot rename it: " + ec.message());
  MLOG_INFO("cluster: imported the standalone node's metadata; the old copy is in {}/metadata.standalone",
            options_.data_dir);
  return Status::ok();
}

void ClusterNode::call(ServerId node, uint16_t method, std::string payload,
                       std::function<void(Result<std::string>)> done, unsigned timeout_ms) {
  runtime::Task task([this, node, method, payload = std::move(payload), done, timeout_ms]() mutable {
    std::string address;
    for (const Server& m : consensus_->members()) {
      if (m.id == node) address = m.address;
    }
    if (address.empty()) return done(Status::unavailable("server " + std::to_string(node) + " is not a member"));
    rpc_client_->call(address, static_cast<rpc::Method>(method), std::move(payload), std::move(done), timeout_ms);
  });
  Status posted = reactor_ ? reactor_->try_post(task) : Status::unavailable("the cluster is stopped");
  if (!posted.is_ok()) done(posted);
}

void ClusterNode::handle(uint16_t method, Handler handler) {
  reactor_->run_sync([&]() {
    rpc_server_->handle(static_cast<rpc::Method>(method),
                        [this, handler](const Peer&, std::string_view payload, RpcServer::Reply reply) {
                          // The answer may come from any thread; the channel lives here.
                          handler(payload, [this, reply](std::string answer) {
                            reactor_->post_reliably([reply, answer = std::move(answer)]() { reply(answer); });
                          });
                        });
  });
}

std::vector<ClusterNode::MemberInfo> ClusterNode::members() {
  std::lock_guard lock(members_mu_);
  return members_snapshot_;
}

void ClusterNode::hand_over_leadership() {
  // Shared: the transfer may complete after this stopped waiting for it.
  auto handed = std::make_shared<std::promise<void>>();
  auto fut = handed->get_future();
  bool asked = reactor_->run_sync([&]() {
    if (!consensus_ || !consensus_->is_leader()) return false;
    size_t voters = 0;
    for (const Server& m : consensus_->members()) voters += m.role == Role::kVoter ? 1 : 0;
    if (voters < 2) return false;
    Status st = consensus_->transfer_leadership(0, [handed](Status done) {
      if (!done.is_ok()) MLOG_WARN("cluster: handing leadership over failed: {}", done.message());
      handed->set_value();
    });
    if (!st.is_ok()) MLOG_WARN("cluster: cannot hand leadership over: {}", st.message());
    return st.is_ok();
  });
  if (!asked) return;
  // The transfer completes within an election timeout, or reports that it did not.
  if (fut.wait_for(std::chrono::milliseconds(options_.consensus.election_timeout_ms * 3)) ==
      std::future_status::ready) {
    MLOG_INFO("cluster: handed leadership over before stopping");
  }
}

void ClusterNode::stop() {
  if (!reactor_) return;
  // The others need not wait for an election timeout to notice.
  if (started_) hand_over_leadership();
  started_ = false;
  std::promise<void> closed;
  auto fut = closed.get_future();
  bool posted = reactor_->post_or_wait([&]() {
    ticker_.reset();
    lease_poll_.reset();
    if (store_) store_->close();
    if (rpc_server_) rpc_server_->close();
    if (rpc_client_) rpc_client_->close();
    auto close_links = [this, &closed]() {
      if (io_ready_) raft_uv_close(io_.get());
      io_ready_ = false;
      auto remaining = std::make_shared<int>(2);
      auto one_done = [remaining, &closed]() {
        if (--*remaining == 0) closed.set_value();
      };
      if (listener_) listener_->close(one_done); else one_done();
      if (connector_) connector_->close(one_done); else one_done();
    };
    if (consensus_) {
      consensus_->close(close_links);
    } else {
      close_links();
    }
  });
  if (posted && fut.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    MLOG_WARN("cluster: the consensus did not close within 10 s");
  }
  reactor_->stop();
  store_.reset();
  rpc_client_.reset();
  rpc_server_.reset();
  raft_store_.reset();
  consensus_.reset();
  transport_.reset();
  connector_.reset();
  listener_.reset();
  io_.reset();
  reactor_.reset();
  machine_.reset();
}

}  // namespace magnetar::cluster
