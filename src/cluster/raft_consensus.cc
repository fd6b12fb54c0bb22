// libraft's memory rules, which this file follows:
// - raft_apply takes ownership of each command buffer only when it returns 0,
//   and the buffer must come from raft_malloc.
// - fsm->snapshot hands raft buffers from raft_malloc (the array and each
//   buffer); with an fsm of version 1 raft frees them once the snapshot is stored.
// - fsm->restore takes ownership of the snapshot buffer when it returns 0; on
//   an error raft frees it.
// - A request struct (raft_apply, raft_change, ...) must stay valid until its
//   callback ran; each callback runs exactly once after the call returned 0.
// - raft_uv needs every entry's length to be a multiple of 8: it sends entries
//   unpadded but decodes them as if padded to 8 bytes (uv_encoding.c), and
//   asserts the length when it writes a segment (uv_segment.c). A command is
//   therefore logged padded (see kCommandAlignment).
#include "cluster/raft_consensus.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "cluster/libraft.h"
#include "cluster/raft_status.h"

namespace magnetar::cluster {

using common::Result;
using common::Status;

namespace {

// A command in the log: its bytes, then 1..8 bytes of padding up to a multiple
// of 8, the last of which holds the padding's length.
constexpr size_t kCommandAlignment = 8;

size_t padded_command_length(size_t length) { return length + kCommandAlignment - length % kCommandAlignment; }

// The command inside a logged entry; nullopt when the padding is not ours.
std::optional<std::string_view> unpad_command(const raft_buffer& buf) {
  if (buf.len == 0 || buf.len % kCommandAlignment != 0) return std::nullopt;
  const auto* bytes = static_cast<const unsigned char*>(buf.base);
  size_t pad = bytes[buf.len - 1];
  if (pad == 0 || pad > kCommandAlignment) return std::nullopt;
  return std::string_view(static_cast<const char*>(buf.base), buf.len - pad);
}

int to_raft_role(Role role) {
  switch (role) {
    case Role::kVoter:
      return RAFT_VOTER;
    case Role::kStandby:
      return RAFT_STANDBY;
    case Role::kSpare:
      return RAFT_SPARE;
  }
  return -1;
}

Role from_raft_role(int role) {
  switch (role) {
    case RAFT_VOTER:
      return Role::kVoter;
    case RAFT_STANDBY:
      return Role::kStandby;
    default:
      return Role::kSpare;
  }
}

}  // namespace

struct RaftConsensus::Impl {
  // One outstanding request of each kind; `data` of the C struct points back here.
  struct ApplyRequest {
    Impl* impl;
    IndexCallback done;
    struct raft_apply req{};
  };
  struct BarrierRequest {
    Impl* impl;
    IndexCallback done;
    struct raft_barrier req{};
  };
  struct ChangeRequest {
    Impl* impl;
    DoneCallback done;
    std::string what;
    ServerId id = 0;
    std::optional<Role> then_assign;  // add_server: the role to assign once added
    raft_change req{};
  };
  struct TransferRequest {
    Impl* impl;
    DoneCallback done;
    struct raft_transfer req{};
  };

  explicit Impl(StateMachine& m) : machine(m) {
    fsm.version = 1;  // raft frees snapshot buffers itself
    fsm.data = this;
    fsm.apply = &Impl::fsm_apply;
    fsm.snapshot = &Impl::fsm_snapshot;
    fsm.restore = &Impl::fsm_restore;
  }

  void configure(const ConsensusOptions& options) {
    raft_set_election_timeout(r, options.election_timeout_ms);
    raft_set_heartbeat_timeout(r, options.heartbeat_timeout_ms);
    raft_set_snapshot_threshold(r, options.snapshot_threshold);
    raft_set_snapshot_trailing(r, options.snapshot_trailing);
    raft_set_pre_vote(r, options.pre_vote);
  }

  // A request that raft failed after accepting it. While closing, raft fails
  // everything pending as "leadership lost": report the shutdown instead.
  Status failure(int rv, std::string_view what) const {
    if (closing) return Status::unavailable(std::string(what) + ": shutting down");
    return raft_status(rv, what);
  }

  // A request raft refused at once.
  Status refused(int rv, std::string_view what) const { return raft_status(rv, what, raft_errmsg(r)); }

  Status check_running(std::string_view what) const {
    if (r == nullptr) return Status::failed_precondition(std::string(what) + ": not attached to a raft instance");
    if (closing) return Status::unavailable(std::string(what) + ": shutting down");
    return Status::ok();
  }

  // libraft does not pass the index to fsm->apply; it applies last_applied + 1
  // and advances last_applied after apply returns (replication.c).
  static int fsm_apply(raft_fsm* fsm, const raft_buffer* buf, void** result) {
    auto* impl = static_cast<Impl*>(fsm->data);
    LogIndex index = raft_last_applied(impl->r) + 1;
    std::optional<std::string_view> command = unpad_command(*buf);
    // Not an entry propose() wrote: applying it would diverge, so this member stops applying.
    if (!command) return RAFT_CORRUPT;
    impl->machine.apply(index, *command);
    impl->applied = index;
    *result = nullptr;
    return 0;
  }

  static int fsm_snapshot(raft_fsm* fsm, raft_buffer* bufs[], unsigned* n_bufs) {
    auto* impl = static_cast<Impl*>(fsm->data);
    std::string bytes = impl->machine.snapshot();
    auto* array = static_cast<raft_buffer*>(raft_malloc(sizeof(raft_buffer)));
    if (array == nullptr) return RAFT_NOMEM;
    array[0].len = bytes.size();
    array[0].base = raft_malloc(std::max<size_t>(bytes.size(), 1));
    if (array[0].base == nullptr) {
      raft_free(array);
      return RAFT_NOMEM;
    }
    std::memcpy(array[0].base, bytes.data(), bytes.size());
    *bufs = array;
    *n_bufs = 1;
    return 0;
  }

  static int fsm_restore(raft_fsm* fsm, raft_buffer* buf) {
    auto* impl = static_cast<Impl*>(fsm->data);
    Status st = impl->machine.restore(std::string_view(static_cast<const char*>(buf->base), buf->len));
    if (!st) return RAFT_CORRUPT;  // raft keeps and frees the buffer
    raft_free(buf->base);
    return 0;
  }

  static void on_applied(struct raft_apply* req, int status, void* /*result*/) {
    std::unique_ptr<ApplyRequest> request(static_cast<ApplyRequest*>(req->data));
    if (status != 0) {
      request->done(request->impl->failure(status, "propose"));
      return;
    }
    request->done(LogIndex{req->index});
  }

  static void on_barrier(struct raft_barrier* req, int status) {
    std::unique_ptr<BarrierRequest> request(static_cast<BarrierRequest*>(req->data));
    if (status != 0) {
      request->done(request->impl->failure(status, "barrier"));
      return;
    }
    request->done(LogIndex{req->index});
  }

  static void on_changed(raft_change* req, int status) {
    std::unique_ptr<ChangeRequest> request(static_cast<ChangeRequest*>(req->data));
    Impl* impl = request->impl;
    if (status != 0) {
      request->done(impl->failure(status, request->what));
      return;
    }
    if (request->then_assign) {
      // add_server's second step: the server is a spare now; give it its role.
      Role role = *request->then_assign;
      request->then_assign.reset();
      request->what = "assign role " + std::string(role_name(role)) + " to server " + std::to_string(request->id);
      int rv = impl->assign(request.get(), role);
      if (rv != 0) {
        request->done(impl->refused(rv, request->what));
        return;
      }
      request.release();  // raft holds it until on_changed runs again
      return;
    }
    request->done(Status::ok());
  }

  static void on_transferred(struct raft_transfer* req) {
    auto* request = static_cast<TransferRequest*>(req->data);
    Impl* impl = request->impl;
    DoneCallback done = std::move(request->done);
    // raft sent TimeoutNow from inside this struct with no completion callback,
    // so the send may still be in flight: keep the memory until close.
    impl->retired_transfers.emplace_back(request);
    if (impl->closing) {
      done(Status::unavailable("leadership transfer: shutting down"));
      return;
    }
    raft_id leader_id = 0;
    const char* address = nullptr;
    raft_leader(impl->r, &leader_id, &address);
    if (leader_id != req->id) {
      done(Status::timeout("leadership transfer to server " + std::to_string(req->id) +
                           " did not complete within an election timeout"));
      return;
    }
    done(Status::ok());
  }

  static void on_closed(raft* r) {
    auto* impl = static_cast<Impl*>(r->data);
    impl->closed_done = true;
    if (impl->closed) std::move(impl->closed)();
  }

  // libraft 0.15's raft_assign records the request as the leader's pending
  // change before it appends the entry, and leaves it recorded when the append
  // fails: the leader would then refuse every later change and, once deposed,
  // call the refused request's callback. Forget it so a refusal stays final.
  int assign(ChangeRequest* request, Role role) {
    int rv = raft_assign(r, &request->req, request->id, to_raft_role(role), &Impl::on_changed);
    if (rv != 0 && raft_state(r) == RAFT_LEADER && r->leader_state.change == &request->req) {
      r->leader_state.change = nullptr;
    }
    return rv;
  }

  Status submit_change(std::unique_ptr<ChangeRequest> request, int rv) {
    if (rv != 0) return refused(rv, request->what);
    request.release();  // raft holds it until on_changed
    return Status::ok();
  }

  StateMachine& machine;
  raft_fsm fsm{};
  std::unique_ptr<raft> owned;  // create(): the raft instance this object owns
  raft* r = nullptr;
  // The last command handed to the StateMachine. raft advances its own
  // last_applied only after the entry's request callback ran, so a propose
  // callback would otherwise see its own command as not yet applied.
  LogIndex applied = 0;
  bool closing = false;
  bool closed_done = false;
  std::function<void()> closed;
  std::vector<std::unique_ptr<TransferRequest>> retired_transfers;
};

RaftConsensus::RaftConsensus(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RaftConsensus::~RaftConsensus() {
  // An owned raft must have finished closing: it still points into impl_.
  assert(!impl_->owned || impl_->closed_done);
}

Result<std::unique_ptr<RaftConsensus>> RaftConsensus::create(raft_io* io, ServerId id, std::string_view address,
                                                             StateMachine& machine,
                                                             const ConsensusOptions& options) {
  auto impl = std::make_unique<Impl>(machine);
  impl->owned = std::make_unique<raft>();
  std::string address_z(address);
  int rv = raft_init(impl->owned.get(), io, &impl->fsm, id, address_z.c_str());
  if (rv != 0) return raft_status(rv, "raft init", raft_errmsg(impl->owned.get()));
  impl->r = impl->owned.get();
  impl->r->data = impl.get();
  impl->configure(options);
  return std::unique_ptr<RaftConsensus>(new RaftConsensus(std::move(impl)));
}

std::unique_ptr<RaftConsensus> RaftConsensus::for_host(StateMachine& machine) {
  return std::unique_ptr<RaftConsensus>(new RaftConsensus(std::make_unique<Impl>(machine)));
}

raft_fsm* RaftConsensus::fsm() { return &impl_->fsm; }

void RaftConsensus::attach(raft* r, const ConsensusOptions& options) {
  assert(impl_->r == nullptr && !impl_->owned);
  assert(r->fsm == &impl_->fsm);
  impl_->r = r;
  impl_->configure(options);
}

void RaftConsensus::mark_closing() { impl_->closing = true; }

Status RaftConsensus::bootstrap(const std::vector<Server>& members) {
  MAGNETAR_RETURN_IF_ERROR(impl_->check_running("bootstrap"));
  raft_configuration conf;
  raft_configuration_init(&conf);
  for (const Server& server : members) {
    int rv = raft_configuration_add(&conf, server.id, server.address.c_str(), to_raft_role(server.role));
    if (rv != 0) {
      raft_configuration_close(&conf);
      return raft_status(rv, "bootstrap: server " + std::to_string(server.id));
    }
  }
  int rv = raft_bootstrap(impl_->r, &conf);
  raft_configuration_close(&conf);
  if (rv != 0) return impl_->refused(rv, "bootstrap");
  return Status::ok();
}

Status RaftConsensus::start() {
  MAGNETAR_RETURN_IF_ERROR(impl_->check_running("start"));
  int rv = raft_start(impl_->r);
  if (rv != 0) return impl_->refused(rv, "start");
  return Status::ok();
}

void RaftConsensus::close(std::function<void()> closed) {
  assert(impl_->owned && !impl_->closing);
  impl_->closing = true;
  impl_->closed = std::move(closed);
  raft_close(impl_->r, &Impl::on_closed);
}

ServerId RaftConsensus::id() const { return impl_->r ? impl_->r->id : 0; }

bool RaftConsensus::is_leader() const { return impl_->r && raft_state(impl_->r) == RAFT_LEADER; }

uint64_t RaftConsensus::term() const { return impl_->r ? impl_->r->current_term : 0; }

std::optional<Server> RaftConsensus::leader() const {
  if (impl_->r == nullptr) return std::nullopt;
  raft_id id = 0;
  const char* address = nullptr;
  raft_leader(impl_->r, &id, &address);
  if (id == 0) return std::nullopt;
  Server server{id, address ? address : "", Role::kVoter};
  for (const Server& member : members()) {
    if (member.id == id) server.role = member.role;
  }
  return server;
}

std::vector<Server> RaftConsensus::members() const {
  std::vector<Server> out;
  if (impl_->r == nullptr) return out;
  const raft_configuration& conf = impl_->r->configuration;
  out.reserve(conf.n);
  for (unsigned i = 0; i < conf.n; i++) {
    const raft_server& s = conf.servers[i];
    out.push_back(Server{s.id, s.address, from_raft_role(s.role)});
  }
  return out;
}

LogIndex RaftConsensus::applied_index() const {
  if (impl_->r == nullptr) return 0;
  return std::max<LogIndex>(raft_last_applied(impl_->r), impl_->applied);
}

Status RaftConsensus::propose(std::string_view command, IndexCallback done) {
  MAGNETAR_RETURN_IF_ERROR(impl_->check_running("propose"));
  if (command.empty()) return Status::invalid_argument("propose: empty command");
  raft_buffer buf;
  buf.len = padded_command_length(command.size());
  buf.base = raft_malloc(buf.len);
  if (buf.base == nullptr) return Status::resource_exhausted("propose: out of memory");
  auto* bytes = static_cast<unsigned char*>(buf.base);
  std::memcpy(bytes, command.data(), command.size());
  std::memset(bytes + command.size(), 0, buf.len - command.size());
  bytes[buf.len - 1] = static_cast<unsigned char>(buf.len - command.size());
  auto request = std::make_unique<Impl::ApplyRequest>(Impl::ApplyRequest{impl_.get(), std::move(done)});
  request->req.data = request.get();
  int rv = raft_apply(impl_->r, &request->req, &buf, 1, &Impl::on_applied);
  if (rv != 0) {
    raft_free(buf.base);  // still ours: raft takes it only on success
    return impl_->refused(rv, "propose");
  }
  request.release();  // raft holds it until on_applied
  return Status::ok();
}

Status RaftConsensus::barrier(IndexCallback done) {
  MAGNETAR_RETURN_IF_ERROR(impl_->check_running("barrier"));
  auto request = std::make_unique<Impl::BarrierRequest>(Impl::BarrierRequest{impl_.get(), std::move(done)});
  request->req.data = request.get();
  int rv = raft_barrier(impl_->r, &request->req, &Impl::on_barrier);
  if (rv != 0) return impl_->refused(rv, "barrier");
  request.release();  // raft holds it until on_barrier
  return Status::ok();
}

Status RaftConsensus::add_server(ServerId id, std::string_view address, Role role, DoneCallback done) {
  MAGNETAR_RETURN_IF_ERROR(impl_->check_running("add server"));
  auto request = std::make_unique<Impl::ChangeRequest>();
  request->impl = impl_.get();
  request->done = std::move(done);
  request->what = "add server " + std::to_string(id);
  request->id = id;
  if (role != Role::kSpare) request->then_assign = role;
  request->req.data = request.get();
  std::string address_z(address);
  int rv = raft_add(impl_->r, &request->req, id, address_z.c_str(), &Impl::on_changed);
  return impl_->submit_change(std::move(request), rv);
}

Status RaftConsensus::assign_role(ServerId id, Role role, DoneCallback done) {
  MAGNETAR_RETURN_IF_ERROR(impl_->check_running("assign role"));
  auto request = std::make_unique<Impl::ChangeRequest>();
  request->impl = impl_.get();
  request->done = std::move(done);
  request->what = "assign role " + std::string(role_name(role)) + " to server " + std::to_string(id);
  request->id = id;
  request->req.data = request.get();
  int rv = impl_->assign(request.get(), role);
  return impl_->submit_change(std::move(request), rv);
}

Status RaftConsensus::remove_server(ServerId id, DoneCallback done) {
  MAGNETAR_RETURN_IF_ERROR(impl_->check_running("remove server"));
  auto request = std::make_unique<Impl::ChangeRequest>();
  request->impl = impl_.get();
  request->done = std::move(done);
  request->what = "remove server " + std::to_string(id);
  request->id = id;
  request->req.data = request.get();
  int rv = raft_remove(impl_->r, &request->req, id, &Impl::on_changed);
  return impl_->submit_change(std::move(request), rv);
}

Status RaftConsensus::transfer_leadership(ServerId to, DoneCallback done) {
  MAGNETAR_RETURN_IF_ERROR(impl_->check_running("leadership transfer"));
  auto request = std::make_unique<Impl::TransferRequest>(Impl::TransferRequest{impl_.get(), std::move(done)});
  request->req.data = request.get();
  int rv = raft_transfer(impl_->r, &request->req, to, &Impl::on_transferred);
  if (rv != 0) return impl_->refused(rv, "leadership transfer");
  request.release();  // raft holds it until on_transferred
  return Status::ok();
}

}  // namespace magnetar::cluster
