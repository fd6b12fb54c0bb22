// RaftLinkTransport: libraft's raft_uv_transport (raft/uv.h) over the cluster port's links.
//
// What raft_uv (libraft 0.15, uv.c, uv_send.c, uv_recv.c) relies on, and this file keeps:
// - init runs in raft_init, before raft_uv sets transport->data; close runs only if init succeeded, and its
//   callback reads transport->data, so this file never touches `data`.
// - The accept callback asserts raft_uv is not closing: after close() no stream reaches it.
// - A connect callback runs once per connect that returned 0, with a stream and 0, or with NULL and an error;
//   raft_uv retries after its retry delay on any error, and on close waits for the callback of every pending
//   connect before it finishes closing (RAFT_CANCELED).
// - Streams come from raft_malloc: raft_uv closes them and frees them with raft_free.
#include <cassert>
#include <cstdio>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cluster/libraft.h"
#include "cluster/link.h"
#include "cluster/link_stream.h"
#include "common/logging.h"

extern "C" {
#include <raft/uv.h>
}

namespace magnetar::cluster {

using common::ErrorCode;
using common::Result;

struct RaftLinkTransport::Impl {
  // One raft connect request while the connector works on it. Outlives the transport when canceled: the
  // connector's callback then frees it (and closes a stream that arrives too late).
  struct Connect {
    Impl* impl;  // null once canceled
    raft_uv_connect* req;
    std::string address;
  };

  Impl(LinkListener& l, LinkConnector& c) : listener(l), connector(c) {
    transport.impl = this;
    transport.init = &Impl::init;
    transport.listen = &Impl::listen;
    transport.connect = &Impl::connect;
    transport.close = &Impl::close;
  }

  static Impl* of(raft_uv_transport* t) { return static_cast<Impl*>(t->impl); }

  static int init(raft_uv_transport* t, raft_id id, const char* address) {
    Impl* impl = of(t);
    if (id != impl->connector.self() || address != impl->connector.self_address()) {
      std::snprintf(t->errmsg, sizeof t->errmsg, "raft server %llu at %s is not this member's link identity "
                    "(server %llu at %s)", static_cast<unsigned long long>(id), address,
                    static_cast<unsigned long long>(impl->connector.self()), impl->connector.self_address().c_str());
      return RAFT_INVALID;
    }
    impl->initialized = true;
    return 0;
  }

  static int listen(raft_uv_transport* t, raft_uv_accept_cb cb) {
    Impl* impl = of(t);
    impl->accept_cb = cb;
    impl->listening = true;
    impl->listener.set_handler(Channel::kRaft, [impl](const Peer& peer, uv_tcp_t* stream) {
      if (impl->closing) {
        close_stream(stream);
        return;
      }
      impl->accept_cb(&impl->transport, peer.id, peer.address.c_str(), reinterpret_cast<uv_stream_t*>(stream));
    });
    return 0;
  }

  static int connect(raft_uv_transport* t, raft_uv_connect* req, raft_id /*id*/, const char* address,
                     raft_uv_connect_cb cb) {
    Impl* impl = of(t);
    assert(!impl->closing);
    req->cb = cb;
    auto* pending = new Connect{impl, req, address};
    impl->connecting.insert(pending);
    impl->connector.connect(pending->address, Channel::kRaft, [pending](Result<uv_tcp_t*> result) {
      std::unique_ptr<Connect> owned(pending);
      Impl* impl = pending->impl;
      if (impl == nullptr) {  // canceled: raft has been told already
        if (result.is_ok()) close_stream(*result);
        return;
      }
      impl->connecting.erase(pending);
      raft_uv_connect* req = pending->req;
      if (!result.is_ok()) {
        impl->note_failure(pending->address, result.status());
        req->cb(req, nullptr, RAFT_NOCONNECTION);
        return;
      }
      impl->note_success(pending->address);
      req->cb(req, reinterpret_cast<uv_stream_t*>(*result), 0);
    });
    return 0;
  }

  static void close(raft_uv_transport* t, raft_uv_transport_close_cb cb) {
    Impl* impl = of(t);
    assert(!impl->closing);
    impl->closing = true;
    impl->close_cb = cb;
    if (impl->listening) impl->listener.set_handler(Channel::kRaft, nullptr);
    for (Connect* pending : impl->connecting) {
      pending->impl = nullptr;
      impl->canceled.push_back(pending->req);
    }
    impl->connecting.clear();
    // raft_uv's own transport reports cancellations and its close from close callbacks: so does this one.
    impl->nudging = true;
    link_detail::after_this_turn(impl->connector.loop(), [impl]() {
      impl->nudging = false;
      std::vector<raft_uv_connect*> canceled = std::move(impl->canceled);
      for (raft_uv_connect* req : canceled) req->cb(req, nullptr, RAFT_CANCELED);
      impl->closed = true;
      impl->close_cb(&impl->transport);
    });
  }

  // Raft retries a peer every second while it is down: log a failure when it changes, and the recovery.
  void note_failure(const std::string& address, const common::Status& status) {
    auto [it, fresh] = failures.emplace(address, status.code());
    if (!fresh && it->second == status.code()) return;
    it->second = status.code();
    if (status.code() == ErrorCode::kPermissionDenied) {
      MLOG_WARN("raft: cannot link to {}: {}", address, status.to_string());
    } else {
      MLOG_INFO("raft: cannot link to {} (retrying): {}", address, status.to_string());
    }
  }

  void note_success(const std::string& address) {
    if (failures.erase(address) > 0) MLOG_INFO("raft: linked to {}", address);
  }

  LinkListener& listener;
  LinkConnector& connector;
  raft_uv_transport transport{};
  raft_uv_accept_cb accept_cb = nullptr;
  raft_uv_transport_close_cb close_cb = nullptr;
  bool initialized = false;
  bool listening = false;
  bool closing = false;
  bool nudging = false;
  bool closed = false;
  std::unordered_set<Connect*> connecting;
  std::vector<raft_uv_connect*> canceled;  // told RAFT_CANCELED once close() is off the stack
  std::unordered_map<std::string, ErrorCode> failures;  // by address: the last failure logged
};

RaftLinkTransport::RaftLinkTransport(LinkListener& listener, LinkConnector& connector)
    : impl_(std::make_unique<Impl>(listener, connector)) {}

RaftLinkTransport::~RaftLinkTransport() {
  assert(impl_->closed || !impl_->initialized);
}

raft_uv_transport* RaftLinkTransport::get() { return &impl_->transport; }

}  // namespace magnetar::cluster
